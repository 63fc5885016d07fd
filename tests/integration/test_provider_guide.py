"""docs/writing-a-provider.md, followed verbatim in an empty directory on a real control plane.

Files come from the fenced blocks with ``title="<path>"``; ``shell`` blocks run in order as
one terminal would (``export`` and ``.`` lines carry over); ``shell background`` blocks are
terminals of their own, waited for until their ``ready="..."`` text appears and stopped with
Ctrl-C (SIGINT) at the end. Any step that fails fails the test with its output, so the guide
cannot drift from the code. It installs kccm from this checkout into a fresh virtual
environment with pip, from the wheelhouse `make wheelhouse` fills beside this interpreter's
environment (``<venv>/wheelhouse``) and never from the package index (``PIP_NO_INDEX``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.testing.controlplane import ControlPlaneError, find_binaries, leftover_processes
from kccm.testing.pytest_plugin import require_control_plane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "writing-a-provider.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
ATTRIBUTE = re.compile(r'(\w+)(?:="([^"]*)")?')
CARRIED = re.compile(r"^\s*(export |\. |source )")
STEP_TIMEOUT = 600.0
READY_TIMEOUT = 120.0
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"


@dataclass(frozen=True)
class Block:
    language: str
    attributes: dict[str, str]
    text: str
    line: int

    @property
    def where(self) -> str:
        return f"{GUIDE.name}:{self.line} ({self.language} {self.attributes})"


def guide_blocks(text: str) -> list[Block]:
    """The fenced blocks of the guide, with their info-string attributes, in order."""
    return [
        Block(
            match.group(1),
            {name: value for name, value in ATTRIBUTE.findall(match.group(2))},
            match.group(3),
            text.count("\n", 0, match.start()) + 1,
        )
        for match in FENCE.finditer(text)
    ]


@dataclass
class Terminal:
    block: Block
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Walkthrough:
    """Runs the guide's steps in ``directory``."""

    directory: Path
    env: dict[str, str]
    carried: list[str] = field(default_factory=list)
    terminals: list[Terminal] = field(default_factory=list)
    outputs: list[tuple[Block, str]] = field(default_factory=list)

    def script(self, block: Block) -> str:
        return "\n".join([*self.carried, block.text])

    def run(self, block: Block) -> None:
        if "title" in block.attributes:
            path = self.directory / block.attributes["title"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text)
        elif block.language == "shell" and "background" in block.attributes:
            self.start(block)
        elif block.language == "shell":
            self.shell(block)
        if block.language == "shell":
            self.carried += [line for line in block.text.splitlines() if CARRIED.match(line)]

    def shell(self, block: Block) -> None:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.script(block)],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
        output = done.stdout + done.stderr
        self.outputs.append((block, output))
        if done.returncode != 0:
            pytest.fail(
                f"{block.where} exited {done.returncode}:\n{block.text}\n--- output\n{output}"
                f"{self.terminal_logs()}"
            )

    def start(self, block: Block) -> None:
        log = self.directory / f"terminal-{len(self.terminals) + 2}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", self.script(block)],
                cwd=self.directory,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        terminal = Terminal(block, process, log)
        self.terminals.append(terminal)
        ready = block.attributes.get("ready", "")
        deadline = time.monotonic() + READY_TIMEOUT
        while ready not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                state = "exited" if process.poll() is not None else "not ready"
                pytest.fail(f"{block.where} {state} before {ready!r}:{self.terminal_logs()}")
            time.sleep(0.2)

    def stop_all(self) -> list[str]:
        """Ctrl-C every terminal, last started first; the problems seen."""
        problems = []
        for terminal in reversed(self.terminals):
            if terminal.process.poll() is None:
                os.killpg(terminal.process.pid, signal.SIGINT)
            try:
                code = terminal.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(terminal.process.pid, signal.SIGKILL)
                code = terminal.process.wait(10)
                problems.append(f"{terminal.block.where} ignored Ctrl-C for 30 s")
            if code != 0:
                problems.append(f"{terminal.block.where} exited {code} on Ctrl-C")
        self.terminals.clear()
        return problems

    def terminal_logs(self) -> str:
        return "".join(
            f"\n--- {t.log.name} ({t.block.text.strip()})\n"
            + "\n".join(t.log.read_text(errors="replace").splitlines()[-30:])
            for t in self.terminals
        )


def _environment(tmp: Path) -> dict[str, str]:
    try:
        binaries = find_binaries(controller_manager=True)
    except ControlPlaneError as exc:
        if require_control_plane():
            pytest.fail(f"the guide needs the control plane: {exc}")
        pytest.skip(f"control plane unavailable: {exc}")
    if binaries.kubectl is None:
        pytest.fail("no kubectl beside the control plane binaries (make controlplane builds it)")
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))]
    env["PATH"] = os.pathsep.join([str(binaries.kubectl.parent), *path])
    env["KCCM_SRC"] = str(ROOT)
    env["TMPDIR"] = str(tmp)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if not (WHEELHOUSE / ".complete").exists():
        missing = f"no wheelhouse at {WHEELHOUSE} (make wheelhouse fills it)"
        if require_control_plane():
            pytest.fail(missing)
        pytest.skip(missing)
    env["PIP_NO_INDEX"] = "1"
    env["PIP_FIND_LINKS"] = str(WHEELHOUSE)
    return env


@pytest.fixture
def walkthrough(tmp_path: Path) -> Iterator[Walkthrough]:
    directory, tmp = tmp_path / "my-cloud", tmp_path / "tmp"
    directory.mkdir()
    tmp.mkdir()
    walk = Walkthrough(directory, _environment(tmp))
    try:
        yield walk
    finally:
        walk.stop_all()


def test_the_guide_has_files_commands_and_terminals() -> None:
    blocks = guide_blocks(GUIDE.read_text())
    titles = {b.attributes["title"] for b in blocks if "title" in b.attributes}
    assert {"pyproject.toml", "src/my_cloud/__init__.py", "tests/test_my_cloud.py"} <= titles
    assert sum("background" in b.attributes for b in blocks) == 2, "dev up and the daemon"
    commands = "\n".join(b.text for b in blocks if b.language == "shell")
    for needed in ("pytest -W error", "kccm dev up", "--cloud-provider=mycloud", "kubectl"):
        assert needed in commands, needed


@pytest.mark.timeout(900)  # a fresh venv, two pip installs, a control plane, a daemon
def test_following_the_guide_verbatim_serves_a_load_balancer(walkthrough: Walkthrough) -> None:
    for block in guide_blocks(GUIDE.read_text()):
        walkthrough.run(block)
    outputs = "\n".join(out for block, out in walkthrough.outputs if "get service" in block.text)
    assert re.search(r"hello\s+LoadBalancer\s+\S+\s+\w+\.lb\.mycloud\.test\s+80:", outputs), (
        outputs + walkthrough.terminal_logs()
    )
    conformance = next(out for block, out in walkthrough.outputs if "pytest" in block.text)
    assert re.search(r"\d+ passed", conformance), conformance
    problems = walkthrough.stop_all()
    assert problems == []
    assert leftover_processes(str(walkthrough.env["TMPDIR"])) == []


def _load_guide_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The guide's ``src/my_cloud/__init__.py``, imported from a scratch copy."""
    (block,) = [
        b
        for b in guide_blocks(GUIDE.read_text())
        if b.attributes.get("title") == "src/my_cloud/__init__.py"
    ]
    path = tmp_path / "my_cloud.py"
    path.write_text(block.text)
    spec = importlib.util.spec_from_file_location("guide_my_cloud", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # the config schema's annotations are resolved through sys.modules
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_config_mistake_the_guide_quotes_is_the_one_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = GUIDE.read_text()
    quoted = re.search(r"`machines = node-a` gives\s+`([^`]+)`", guide)
    assert quoted is not None, "the guide quotes the message for `machines = node-a`"
    (conf,) = [b for b in guide_blocks(guide) if b.attributes.get("title") == "cloud.conf"]
    broken = tmp_path / "cloud.conf"
    broken.write_text(conf.text.replace("machines = node-a=10.0.0.1", "machines = node-a"))
    provider = _load_guide_provider(tmp_path, monkeypatch)
    with pytest.raises(CloudConfigError) as caught, broken.open() as stream:
        provider.new_cloud(stream)
    issues = [issue.replace(f"{tmp_path}/", "") for issue in caught.value.issues]
    assert issues == [quoted.group(1)]


def test_block_attributes_are_read() -> None:
    text = '```shell background ready="press Ctrl-C"\nkccm dev up\n```\n'
    (block,) = guide_blocks(text)
    assert (block.language, block.attributes, block.text) == (
        "shell",
        {"background": "", "ready": "press Ctrl-C"},
        "kccm dev up\n",
    )
    assert shlex.split(block.text) == ["kccm", "dev", "up"]
