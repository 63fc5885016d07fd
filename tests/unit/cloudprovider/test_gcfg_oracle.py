"""Property test: the gcfg parser reads what dulwich.config (git-config syntax) reads."""

from __future__ import annotations

import io
from dataclasses import dataclass

from dulwich.config import ConfigFile
from hypothesis import given, settings
from hypothesis import strategies as st

from kccm.cloudprovider.config import parse_gcfg

Key = tuple[str, str | None]
Model = dict[Key, list[tuple[str, str]]]

SECTION_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
VARIABLE_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,6}", fullmatch=True)
TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ019 \t\"\\#;=[]'-_.é✓")), min_size=0, max_size=12
)
# No comment characters in subsection names: dulwich strips comments from a header before it
# reads its quotes, so it misreads [a "\";"] (ours is tested on such names separately).
SUBSECTIONS = st.none() | st.text(alphabet=st.sampled_from(list('ab Z"\\]')), max_size=8)


@dataclass(frozen=True)
class Variable:
    name: str
    value: str | None  # None: a bare boolean
    quote_all: bool
    comment: bool
    continuation: int  # where to insert "\\\n" in an unquoted value (0: nowhere)


@dataclass(frozen=True)
class Section:
    name: str
    subsection: str | None
    variables: list[Variable]


variables = st.builds(
    Variable,
    VARIABLE_NAMES,
    st.none() | TEXT,
    st.booleans(),
    st.booleans(),
    st.integers(min_value=0, max_value=10),
)
sections = st.builds(Section, SECTION_NAMES, SUBSECTIONS, st.lists(variables, max_size=5))


def quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return f'"{escaped}"'


def needs_quotes(value: str) -> bool:
    return value != value.strip(" \t") or any(c in value for c in "#;\t")


def render_value(var: Variable) -> str:
    assert var.value is not None
    if var.quote_all or needs_quotes(var.value):
        return quote(var.value)
    text = var.value.replace("\\", "\\\\").replace('"', '\\"')
    cut = var.continuation
    # dulwich strips a continuation line's leading blanks: only split before a non-blank char,
    # and never inside an escape sequence.
    if 0 < cut < len(text) and text[cut] not in " \t" and text[cut - 1] != "\\":
        text = text[:cut] + "\\\n" + text[cut:]
    return text


def render(model: list[Section]) -> str:
    lines = []
    for section in model:
        header = section.name
        if section.subsection is not None:
            escaped = section.subsection.replace("\\", "\\\\").replace('"', '\\"')
            header += f' "{escaped}"'
        lines.append(f"[{header}]")
        for var in section.variables:
            if var.value is None:
                lines.append(f"  {var.name}")
                continue
            value = render_value(var)
            comment = " ; note" if var.comment and "\n" not in value else ""
            lines.append(f"  {var.name} = {value}{comment}")
    return "\n".join(lines) + "\n"


def ours(text: str) -> Model:
    parsed = parse_gcfg(text, "prop.conf")
    result: Model = {}
    for name, subsection, _ in parsed.sections:
        result.setdefault((name.lower(), subsection), [])
    for entry in parsed.entries:
        value = "true" if entry.value is None else entry.value
        result[(entry.section.lower(), entry.subsection)].append((entry.name.lower(), value))
    return result


def oracle(text: str) -> Model:
    config = ConfigFile.from_file(io.BytesIO(text.encode()))
    result: Model = {}
    for section, values in config._values.items():
        key = (section[0].decode().lower(), section[1].decode() if len(section) > 1 else None)
        items = [(k.decode().lower(), v.decode()) for k, v in values.items()]
        result.setdefault(key, []).extend(items)
    return result


@settings(max_examples=150, deadline=None)
@given(st.lists(sections, min_size=1, max_size=4))
def test_parser_agrees_with_dulwich(model: list[Section]) -> None:
    text = render(model)
    assert ours(text) == oracle(text), text


@settings(max_examples=100, deadline=None)
@given(st.lists(sections, min_size=1, max_size=4))
def test_values_round_trip_through_quoting(model: list[Section]) -> None:
    parsed = ours(render(model))
    for section in model:
        expected = [
            (v.name.lower(), "true" if v.value is None else v.value) for v in section.variables
        ]
        got = parsed[(section.name, section.subsection)]
        # several generated sections may share a key: ours lists them in file order
        assert all(item in got for item in expected)
