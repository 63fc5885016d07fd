"""kccm.util.gostrconv against Go's own answers.

The rows come from ``go_strconv_table.py``, which Go printed itself: the program is
``hack/gostrconv/main.go``; regenerate with
``(cd hack/gostrconv && go run .) > tests/unit/util/go_strconv_table.py`` and
``ruff format`` it. Each row is
(input, Go's result or None, Go's error text or None).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from go_strconv_table import (
    DURATION_STRING,
    FORMAT_BOOL,
    PARSE_BOOL,
    PARSE_DURATION_NS,
    PARSE_INT_BASE_0,
    PARSE_INT_BASE_10,
    QUOTE,
)

from kccm.util.gostrconv import (
    format_bool,
    format_duration,
    format_duration_ns,
    go_quote,
    parse_bool,
    parse_duration,
    parse_duration_ns,
    parse_int,
)


def _rows(table: Sequence[tuple[Any, ...]]) -> Any:
    return pytest.mark.parametrize(
        ("text", "result", "error"), table, ids=[repr(r[0]) for r in table]
    )


def _check(parse: Callable[[str], Any], text: str, result: Any, error: str | None) -> None:
    if error is None:
        assert parse(text) == result
    else:
        with pytest.raises(ValueError, match=re.escape(error)) as raised:
            parse(text)
        assert str(raised.value) == error


@_rows(PARSE_BOOL)
def test_parse_bool_answers_as_go(text: str, result: bool | None, error: str | None) -> None:
    _check(parse_bool, text, result, error)


@pytest.mark.parametrize(("value", "text"), FORMAT_BOOL, ids=["true", "false"])
def test_format_bool_answers_as_go(value: bool, text: str) -> None:
    assert format_bool(value) == text


@_rows(PARSE_INT_BASE_10)
def test_parse_int_base_10_answers_as_go(text: str, result: int | None, error: str | None) -> None:
    _check(parse_int, text, result, error)


@_rows(PARSE_INT_BASE_0)
def test_parse_int_base_0_answers_as_go(text: str, result: int | None, error: str | None) -> None:
    _check(lambda value: parse_int(value, 0), text, result, error)


@_rows(PARSE_DURATION_NS)
def test_parse_duration_answers_as_go(text: str, result: int | None, error: str | None) -> None:
    _check(parse_duration_ns, text, result, error)


@pytest.mark.parametrize(
    ("text", "seconds"), [("1.5s", 1.5), ("-2m3.4s", -123.4), ("300ms", 0.3), ("0", 0.0)]
)
def test_parse_duration_in_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("nanos", "text"), DURATION_STRING, ids=[str(r[0]) for r in DURATION_STRING]
)
def test_format_duration_answers_as_go(nanos: int, text: str) -> None:
    assert format_duration_ns(nanos) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0s"), (1.5, "1.5s"), (0.25, "250ms"), (300.0, "5m0s"), (-1.5, "-1.5s")],
)
def test_format_duration_in_seconds(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("text", "quoted"), QUOTE, ids=[repr(r[0]) for r in QUOTE])
def test_go_quote_answers_as_go(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


def test_parse_int_refuses_other_bases() -> None:
    with pytest.raises(ValueError, match="bases 10 and 0"):
        parse_int("17", 8)


def test_huge_inputs_are_out_of_range_not_a_python_error() -> None:
    with pytest.raises(ValueError, match="value out of range"):
        parse_int("9" * 5000)
    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_duration_ns("9" * 5000 + "s")
    assert parse_duration_ns("1." + "0" * 5000 + "1s") == 1_000_000_000
