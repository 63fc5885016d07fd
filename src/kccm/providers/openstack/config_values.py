"""Value parsers with gcfg's rules, for the fields of OCCM's ``cloud.conf``.

OCCM reads its config with ``gopkg.in/gcfg.v1`` v1.2.3 (``go.mod`` of cloud-provider-openstack
v1.36.0). Its setters (``set.go``) decide what a value may look like:

- ``bool``: ``types.ParseBool``, case-insensitive ``true/yes/on/1`` and ``false/no/off/0``; a
  bare variable is ``true``; an empty value (``key =``) is an error;
- ``int``/``uint``: ``types.ParseInt`` in ``Dec|Hex`` mode (``typeModes``): ``10`` or
  ``0x0a``; a ``uint`` refuses a sign;
- ``util.MyDuration`` (``pkg/util/util.go``): Go's ``time.ParseDuration`` (``5s``,
  ``1m30s``, ``250ms``); a unit is required except for ``0``.

Each parser raises ``ValueError("what is wrong")``, which kccm's config binder reports with the
file, line, section and key.
"""

from __future__ import annotations

import re

from kccm.util.gostrconv import parse_duration

__all__ = ["gcfg_bool", "gcfg_int", "gcfg_uint", "go_duration"]

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_DEC = re.compile(r"[+-]?[0-9]+")
_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+)")


def gcfg_bool(text: str) -> bool:
    """gcfg's ``types.ParseBool`` (the bare form is handled by the binder)."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("invalid bool (gcfg takes true/false, yes/no, on/off or 1/0)")


def gcfg_int(text: str) -> int:
    """gcfg's ``int`` in ``Dec|Hex`` mode: ``-3``, ``12``, ``0x1f``."""
    value = text.strip()
    if _DEC.fullmatch(value):
        return int(value, 10)
    hexa = _HEX.fullmatch(value)
    if hexa:
        return int(hexa.group(1) + hexa.group(2), 16)
    raise ValueError("invalid int (decimal or 0x hexadecimal)")


def gcfg_uint(text: str) -> int:
    """gcfg's ``uint``: as :func:`gcfg_int` without a negative value."""
    value = gcfg_int(text)
    if value < 0 or text.strip().startswith(("-", "+")):
        raise ValueError("invalid unsigned int (a number of 0 or more, no sign)")
    return value


def go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (:func:`kccm.util.gostrconv.parse_duration`) as seconds:
    ``5s`` -> 5.0, ``1m30s`` -> 90.0; surrounding blanks are ignored."""
    try:
        return parse_duration(text.strip())
    except ValueError as err:
        raise ValueError(
            "invalid duration (a number with a unit: ns, us, ms, s, m or h; e.g. 5s, 1m30s)"
        ) from err
