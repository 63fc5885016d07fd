"""Every relative link in the README, DEVELOPMENT.md and docs/ leads somewhere.

A link's file must exist (relative to the page), and its ``#anchor`` must be a heading of the
page it points at, slugged as GitHub slugs headings: markup dropped, lower case, every
character but letters, digits, ``-``, ``_`` and spaces removed, spaces turned into ``-``, and
``-1``, ``-2``, ... appended to repeats. Links inside code (fenced or inline) are no links.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "DEVELOPMENT.md", *(ROOT / "docs").rglob("*.md")])
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose(text: str) -> str:
    """The page without its code blocks and inline code (headings keep their text)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[`*]|<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(page: Path) -> Iterator[str]:
    text = _INLINE_CODE.sub("", prose(page.read_text()))
    yield from _LINK.findall(text)
    yield from _REFERENCE.findall(text)


def relative_links() -> Iterator[object]:
    for page in PAGES:
        for target in links(page):
            if target and not _EXTERNAL.match(target):
                name = f"{page.relative_to(ROOT)}->{target}"
                yield pytest.param(page, target, id=name)


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) leads nowhere, or None."""
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{path} does not exist"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{dest.relative_to(ROOT)} has no heading #{anchor}"
    return None


@pytest.mark.parametrize(("page", "target"), list(relative_links()))
def test_a_relative_link_leads_somewhere(page: Path, target: str) -> None:
    assert broken(page, target) is None, broken(page, target)


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        pytest.param("Scale at 10k + 3k (issue 28)", "scale-at-10k--3k-issue-28", id="plus-sign"),
        pytest.param(
            "`/metrics` and `/healthz` under 200 ms (second pass, 2026-11-27)",
            "metrics-and-healthz-under-200-ms-second-pass-2026-11-27",
            id="inline-code",
        ),
        pytest.param(
            "What `get_load_balancer` and a repeated `ensure_load_balancer` must guarantee",
            "what-get_load_balancer-and-a-repeated-ensure_load_balancer-must-guarantee",
            id="underscores-stay",
        ),
        pytest.param(
            "Parallel, bounded, and leaving nothing behind",
            "parallel-bounded-and-leaving-nothing-behind",
            id="commas",
        ),
    ],
)
def test_headings_are_slugged_as_github_does(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_a_missing_anchor_and_a_missing_file_are_caught() -> None:
    readme = ROOT / "README.md"
    assert broken(readme, "DEVELOPMENT.md#no-such-heading") is not None
    assert broken(readme, "docs/no-such-page.md") is not None
    assert broken(readme, "docs/measurements.md#chaos-issue-28") is None
