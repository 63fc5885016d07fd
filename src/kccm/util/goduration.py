"""Go's ``time.Duration.String()``, for messages that quote upstream's wording."""

from __future__ import annotations

__all__ = ["format_go_duration"]


def format_go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` for the event message (``1.5s``, ``250ms``, ``0s``)."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_trim(nanos / 1_000)}µs"
    if nanos < 1_000_000_000:
        return f"{sign}{_trim(nanos / 1_000_000)}ms"
    return sign + _go_seconds(nanos)


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _go_seconds(nanos: int) -> str:
    hours, rest = divmod(nanos, 3_600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = _trim(rest / 1e9) + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    if minutes:
        return f"{minutes}m{secs}"
    return secs
