"""Go's text conversions, written once: what upstream's flags, annotations and config values
accept, with Go's own error texts.

* :func:`parse_bool` / :func:`format_bool`: ``strconv.ParseBool`` / ``FormatBool``;
* :func:`parse_int`: ``strconv.ParseInt(s, base, 64)`` for base 10 (``strconv.Atoi``) and
  base 0 (Go's literal syntax, which pflag's int flags use);
* :func:`parse_duration` / :func:`parse_duration_ns`: ``time.ParseDuration``;
* :func:`format_duration` / :func:`format_duration_ns`: ``time.Duration.String()``;
* :func:`go_quote`: ``strconv.Quote`` (Go's ``%q``), as the strconv errors quote their input.

``tests/unit/util/test_gostrconv.py`` compares every function with a table that Go itself
printed (``hack/gostrconv``). Go's rules are strict: no surrounding spaces, case-sensitive
bool spellings, a unit on every duration but a lone ``0``.
"""

from __future__ import annotations

__all__ = [
    "format_bool",
    "format_duration",
    "format_duration_ns",
    "go_quote",
    "parse_bool",
    "parse_duration",
    "parse_duration_ns",
    "parse_int",
]

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# -- strconv.Quote ---------------------------------------------------------------------------

_SHORT_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_SHORT_ESCAPES |= {"\v": r"\v", "\\": r"\\", '"': r"\""}


def go_quote(text: str) -> str:
    """``strconv.Quote``: printable runes as they are, the rest escaped as Go escapes them."""
    return '"' + "".join(_quote_rune(char) for char in text) + '"'


def _quote_rune(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if char.isprintable():
        return char
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# -- strconv.ParseBool / FormatBool -----------------------------------------------------------


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``: ``1 t T TRUE true True`` and ``0 f F FALSE false False`` only."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


def format_bool(value: bool) -> str:
    """``strconv.FormatBool``."""
    return "true" if value else "false"


# -- strconv.ParseInt --------------------------------------------------------------------------

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_PREFIXES = {"0x": 16, "0o": 8, "0b": 2}


def parse_int(text: str, base: int = 10) -> int:
    """``strconv.ParseInt(text, base, 64)`` for ``base`` 10 (``Atoi``) or 0 (``0x``, ``0o``,
    ``0b``, a leading ``0`` for octal, and ``_`` between digits)."""
    if base not in (0, 10):
        raise ValueError(f"parse_int supports bases 10 and 0, not {base}")
    signed = text[:1] in ("+", "-")
    value = _int_value(text[1:] if signed else text, base)
    if value is None:
        raise ValueError(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    value = -value if text[:1] == "-" else value
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return value


def _int_value(digits: str, base: int) -> int | None:
    """The magnitude of an unsigned Go integer literal, or None when it is not one."""
    if base == 10:
        return _digits_value(digits, 10)
    radix = _PREFIXES.get(digits[:2].lower())
    if radix is not None:
        body = digits[2:]
    elif digits[:1] == "0" and len(digits) > 1:
        radix, body = 8, digits[1:]
    else:
        radix, body = 10, digits
    if "_" in digits and not _underscores_ok(digits):
        return None
    return _digits_value(body.replace("_", ""), radix)


def _digits_value(digits: str, radix: int) -> int | None:
    if not digits or any(_DIGITS.find(char.lower()) not in range(radix) for char in digits):
        return None
    significant = digits.lstrip("0")
    return int(significant or "0", radix) if len(significant) <= 64 else 2**64


def _underscores_ok(digits: str) -> bool:
    """Go's ``underscoreOK``: each ``_`` sits between digits, or after a base prefix."""
    prefixed = digits[:2].lower() in _PREFIXES
    previous = "0" if prefixed else "^"  # a base prefix counts as a digit
    rest = digits[2:] if prefixed else digits
    for char in rest:
        if char == "_" and previous != "0":
            return False
        previous = "_" if char == "_" else "0"
    return previous != "_"


# -- time.ParseDuration ----------------------------------------------------------------------

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_NUMERIC = frozenset("0123456789.")
_ASCII_DIGITS = frozenset("0123456789")


def parse_duration(text: str) -> float:
    """``time.ParseDuration``, in seconds; errors carry Go's messages."""
    return parse_duration_ns(text) / 1e9


def parse_duration_ns(text: str) -> int:
    """``time.ParseDuration``, in nanoseconds (a Go ``time.Duration``)."""
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise _duration_error("invalid duration", text)
    total = 0
    while rest:
        amount, rest = _duration_term(rest, text)
        total += amount
        if total > 2**63:
            raise _duration_error("invalid duration", text)
    if negative:
        return -total
    if total > _INT64_MAX:
        raise _duration_error("invalid duration", text)
    return total


def _duration_term(rest: str, text: str) -> tuple[int, str]:
    """One ``[0-9]*(.[0-9]*)?unit`` term of ``text``: its nanoseconds and what follows."""
    if rest[0] not in _NUMERIC:
        raise _duration_error("invalid duration", text)
    whole, rest = _leading(rest, _ASCII_DIGITS)
    value = _whole_value(whole, text)
    fraction = ""
    if rest[:1] == ".":
        fraction, rest = _leading(rest[1:], _ASCII_DIGITS)
        if not whole and not fraction:
            raise _duration_error("invalid duration", text)
    elif not whole:
        raise _duration_error("invalid duration", text)
    unit, rest = _leading(rest, _NUMERIC, until=True)
    if not unit:
        raise _duration_error("missing unit in duration", text)
    if unit not in _UNIT_NS:
        raise _duration_error(f"unknown unit {_time_quote(unit)} in duration", text)
    scale = _UNIT_NS[unit]
    if value > 2**63 // scale:
        raise _duration_error("invalid duration", text)
    value = value * scale + _fraction_ns(fraction, scale)
    if value > 2**63:
        raise _duration_error("invalid duration", text)
    return value, rest


def _whole_value(digits: str, text: str) -> int:
    """Go's ``leadingInt``: more than 2**63 is an invalid duration, whatever follows."""
    significant = digits.lstrip("0")
    value = int(significant) if significant and len(significant) <= 20 else 0
    if len(significant) > 20 or value > 2**63:
        raise _duration_error("invalid duration", text)
    return value


def _leading(text: str, chars: frozenset[str], *, until: bool = False) -> tuple[str, str]:
    """Split ``text`` after its longest prefix of ``chars`` (of anything else if ``until``)."""
    end = 0
    while end < len(text) and (text[end] in chars) != until:
        end += 1
    return text[:end], text[end:]


def _fraction_ns(digits: str, scale: int) -> int:
    """Go's ``leadingFraction`` and float step: digits past int64 precision are dropped."""
    value, divisor = 0, 1.0
    for char in digits:
        following = value * 10 + int(char)
        if value > _INT64_MAX // 10 or following > 2**63:
            break
        value, divisor = following, divisor * 10
    return int(float(value) * (float(scale) / divisor)) if value else 0


def _duration_error(message: str, text: str) -> ValueError:
    return ValueError(f"time: {message} {_time_quote(text)}")


def _time_quote(text: str) -> str:
    """The time package's ``quote``: non-ASCII and control characters as their UTF-8 bytes."""
    out: list[str] = []
    for char in text:
        if ord(char) < 0x20 or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


# -- time.Duration.String ----------------------------------------------------------------------


def format_duration(seconds: float) -> str:
    """``time.Duration.String()`` of ``seconds`` (rounded to the nanosecond): ``5m0s``,
    ``1.5s``, ``300ms``, ``0s``."""
    return format_duration_ns(round(seconds * 1e9))


def format_duration_ns(nanos: int) -> str:
    """``time.Duration.String()`` of a duration in nanoseconds."""
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos == 0:
        return "0s"
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, nanos = divmod(nanos, _UNIT_NS["h"])
    minutes, nanos = divmod(nanos, _UNIT_NS["m"])
    text = _decimal(nanos, _UNIT_NS["s"]) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(width, '0').rstrip('0')}"
