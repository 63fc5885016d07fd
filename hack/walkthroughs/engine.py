"""The machinery of hack/walkthroughs.py: a scratch copy, edits, checks, and the runs.

A walk-through is a list of steps, each an edit of the scratch copy and the checks the text of
DEVELOPMENT.md names for it. The complete version (every step) must pass every check; a
half-done version (one step, or one part of a step, left out) must fail the checks its step
names. The scratch copy is a git repository of its own in a temporary directory: between
versions it is reset to the copy of the checkout, and at the end it is removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KCCM_VENV", ROOT / ".venv")).resolve()


@dataclass(frozen=True)
class Check:
    """A command the walk-through's text names, run in the scratch copy."""

    label: str
    argv: tuple[str, ...]
    needs: tuple[str, ...] = ()
    """Files the check runs (a pytest check's test files): a missing one is reported."""

    def command(self) -> list[str]:
        return [
            str(VENV / "bin" / self.argv[0]) if self.argv[0] in _VENV_TOOLS else self.argv[0],
            *self.argv[1:],
        ]


_VENV_TOOLS = {"python"}


def pytest(*paths: str) -> Check:
    return Check(
        " ".join(paths),
        (
            "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-rfE",
            *paths,
        ),
        needs=tuple(path.split("::")[0] for path in paths),
    )


def make(target: str) -> Check:
    # The checkout's venv, never remade from the scratch copy (-o: its stamp counts as current).
    stamp = VENV / ".installed-stamp"
    return Check(f"make {target}", ("make", "-s", f"VENV={VENV}", "-o", str(stamp), target))


Edit = Callable[[Path], None]
MISSING = -1000
"""The result of a check whose test file is not there (not as expected, either way)."""


@dataclass(frozen=True)
class Part:
    """One part of a step: an edit, and the checks that must fail when it is left out (empty:
    leaving it out is caught by an earlier part's checks, or it is what a later step needs)."""

    name: str
    edit: Edit
    trips: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Step:
    number: str
    text: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Variant:
    """Half-done in another way than leaving a part out: ``edit`` is applied after the
    complete version, and ``checks`` must fail, unless the path is a known ``silent`` one
    (every check passes: the text says so, and this run notices when a check starts to fail,
    so that the text can be updated)."""

    what: str
    edit: Edit
    checks: tuple[Check, ...]
    silent: bool = False


@dataclass
class WalkThrough:
    name: str
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    """What the complete version must pass (the checks the text names, and the final step's)."""
    variants: tuple[Variant, ...] = ()
    pending: tuple[str, ...] = ()
    touched: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    version: str
    expect_pass: bool
    results: list[tuple[Check, int, str]]

    @property
    def ok(self) -> bool:
        if any(code == MISSING for _, code, _ in self.results):
            return False
        if self.expect_pass:
            return all(code == 0 for _, code, _ in self.results)
        return any(code != 0 for _, code, _ in self.results)


# -- edits -----------------------------------------------------------------------------------


def write(rel: str, text: str) -> Edit:
    def edit(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return edit


def replace(rel: str, old: str, new: str) -> Edit:
    """Replace ``old`` (which must occur exactly once) by ``new``."""

    def edit(root: Path) -> None:
        path = root / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise AnchorError(f"{rel}: expected one {old!r}, found {text.count(old)}")
        path.write_text(text.replace(old, new))

    return edit


def insert_before(rel: str, anchor: str, text: str) -> Edit:
    return replace(rel, anchor, text + anchor)


def insert_after(rel: str, anchor: str, text: str) -> Edit:
    return replace(rel, anchor, anchor + text)


def run_check_edit(check: Check) -> Edit:
    """An edit that is a command (``make flags-doc``). In a half-done version it may fail
    (the code it runs is half-done); that is shown, and the checks judge the version."""

    def edit(root: Path) -> None:
        code, out = run(check, root)
        if code != 0:
            print(f"    ({check.label} failed here:)\n{trips(out, limit=2)}", flush=True)

    return edit


def chain(*edits: Edit) -> Edit:
    def edit(root: Path) -> None:
        for one in edits:
            one(root)

    return edit


class AnchorError(Exception):
    """The walk-through no longer fits the code: an anchor it edits at is gone."""


# -- the scratch copy -------------------------------------------------------------------------


@contextmanager
def scratch() -> Iterator[Path]:
    """A copy of the checkout (tracked and untracked files, not ignored ones) as a git
    repository of its own, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="kccm-walkthroughs-"))
    try:
        root = base / "kccm"
        files = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for rel in filter(None, files):
            src = ROOT / rel
            if src.is_file():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, root / rel)
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(
            root,
            "-c",
            "user.name=walkthroughs",
            "-c",
            "user.email=w@example.invalid",
            "commit",
            "-q",
            "-m",
            "checkout",
        )
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def reset(root: Path) -> None:
    """Back to the checkout's copy; ignored files (mypy's and ruff's caches) stay warm."""
    git(root, "reset", "-q", "--hard")
    git(root, "clean", "-q", "-fd")


def changed(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(line[3:] for line in out.splitlines())


def run(check: Check, root: Path) -> tuple[int, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root / "src"), str(root / "examples" / "external-provider" / "src")]
    )
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env.get("PATH", "")])
    proc = subprocess.run(check.command(), cwd=root, env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def trips(output: str, limit: int = 4) -> str:
    """What a failing check said: pytest's FAILED/ERROR lines, mypy's errors, else the tail."""
    lines = [
        line.strip()
        for line in output.splitlines()
        if line.startswith(("FAILED", "ERROR", "E   ")) or ": error:" in line or "BROKEN" in line
    ]
    if not lines:
        lines = [line.rstrip() for line in output.strip().splitlines()[-limit:]]
    shown = lines[:limit] + ([f"... ({len(lines) - limit} more)"] if len(lines) > limit else [])
    return "\n".join(f"      {line[:220]}" for line in shown)


# -- the runs ---------------------------------------------------------------------------------


def apply(root: Path, steps: Sequence[Step], leave_out: str | None = None) -> None:
    for step in steps:
        for part in step.parts:
            if part.name != leave_out:
                part.edit(root)


def check_all(root: Path, version: str, checks: Sequence[Check], expect_pass: bool) -> Outcome:
    results = []
    for check in checks:
        started = time.monotonic()
        missing = [path for path in check.needs if not (root / path).exists()]
        if missing:
            print(f"    MISSING {check.label}: no {', '.join(missing)}", flush=True)
            results.append((check, MISSING, "missing"))
            continue
        code, out = run(check, root)
        results.append((check, code, out))
        state = "ok" if code == 0 else "FAILS"
        print(f"    {state:5} {check.label} ({time.monotonic() - started:.0f} s)", flush=True)
        if code != 0 and not expect_pass:
            print(trips(out), flush=True)
        if code != 0 and expect_pass:
            print(trips(out, limit=20), flush=True)
    return Outcome(version, expect_pass, results)


def version(
    root: Path,
    name: str,
    prepare: Callable[[], None],
    checks: Sequence[Check],
    expect_pass: bool,
) -> Outcome:
    """One version: reset, ``prepare`` (edits), checks. An edit whose anchor is gone makes
    the version fail (the walk-through no longer fits the code); the others still run."""
    reset(root)
    try:
        prepare()
    except AnchorError as exc:
        print(f"    the walk-through no longer fits the code: {exc}", flush=True)
        return Outcome(name, expect_pass, [(Check("edit", ("true",)), MISSING, str(exc))])
    return check_all(root, name, checks, expect_pass)


def walk(walkthrough: WalkThrough, root: Path) -> list[Outcome]:
    steps = walkthrough.steps
    print(f"\n== {walkthrough.name}: the complete version", flush=True)

    def complete() -> None:
        apply(root, steps)
        walkthrough.touched[:] = changed(root)
        print("  files touched: " + ", ".join(walkthrough.touched), flush=True)

    outcomes = [version(root, "complete", complete, walkthrough.checks, expect_pass=True)]
    for step in steps:
        for part in step.parts:
            if part.trips:
                name = f"step {step.number} without {part.name}"
                print(f"  -- {name}", flush=True)
                leave_out = part.name
                outcomes.append(
                    version(
                        root,
                        name,
                        lambda leave_out=leave_out: apply(root, steps, leave_out),
                        part.trips,
                        expect_pass=False,
                    )
                )
    for variant in walkthrough.variants:
        label = "known silent path, " if variant.silent else ""
        print(f"  -- {label}{variant.what}", flush=True)
        outcomes.append(
            version(
                root,
                variant.what,
                lambda variant=variant: (apply(root, steps), variant.edit(root)),
                variant.checks,
                expect_pass=variant.silent,
            )
        )
    for note in walkthrough.pending:
        print(f"  -- pending: {note}", flush=True)
    reset(root)
    return outcomes


def report(results: dict[str, list[Outcome]]) -> int:
    print("\n== summary", flush=True)
    bad = 0
    for name, outcomes in results.items():
        for outcome in outcomes:
            verdict = "as expected" if outcome.ok else "NOT AS EXPECTED"
            want = "passes" if outcome.expect_pass else "trips"
            if outcome.version != "complete" and outcome.expect_pass:
                want = "known silent: passes"
            print(f"  {name}: {outcome.version}: {want} -> {verdict}")
            bad += not outcome.ok
    print(f"\n{bad} version(s) not as expected", flush=True)
    return 1 if bad else 0


def main(walkthroughs: Sequence[WalkThrough], only: set[str] | None) -> int:
    chosen = [w for w in walkthroughs if only is None or w.name in only]
    results: dict[str, list[Outcome]] = {}
    with scratch() as root:
        print(f"scratch copy ready ({len(changed(root))} files differ: none expected)", flush=True)
        for walkthrough in chosen:
            try:
                results[walkthrough.name] = walk(walkthrough, root)
            except AnchorError as exc:
                print(f"  the walk-through no longer fits the code: {exc}", file=sys.stderr)
                results[walkthrough.name] = [
                    Outcome(f"edit failed: {exc}", True, [(Check("edit", ("true",)), 1, str(exc))])
                ]
    return report(results)
