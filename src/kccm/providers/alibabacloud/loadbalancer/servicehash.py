"""Upstream's ``GetServiceHash`` (cloud-provider-alibaba-cloud v2.14.0,
``pkg/controller/helper/service_utils.go``), the value of the Service label
``service.beta.kubernetes.io/hash``: SHA-224 of a YAML text of some Service fields.

Upstream builds ``[ports, type, externalTrafficPolicy, loadBalancerClass, annotations,
deletionTimestamp, (loadBalancerSourceRanges when not empty)]``, turns it into JSON values,
drops zero values (``pkg/util/hash/hash.go`` ``remove``: in every map, and from the outer list
only, since a nested list's filtered copy is lost), and hashes ``sigs.k8s.io/yaml`` v1.3.0's
text of it (``gopkg.in/yaml.v2`` v2.4.0: block style, indent 2, keys in its natural order,
lines folded after column 80). This module writes that text for the shapes that list can hold
(strings, integers, maps of strings, lists).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["service_hash"]

RECONCILE_HASH_LABEL = "alibabacloud.com/reconcile.hash"
_PORT_FIELDS = ("name", "protocol", "appProtocol", "port", "targetPort", "nodePort")
_BEST_WIDTH = 80
_SIMPLE_KEY_BYTES = 128


def service_hash(service: Mapping[str, Any]) -> str:
    """``helper.GetServiceHash``."""
    meta = service.get("metadata") or {}
    spec = service.get("spec") or {}
    ports = [{k: p[k] for k in _PORT_FIELDS if k in p} for p in spec.get("ports") or ()]
    op: list[Any] = [
        ports or None,
        spec.get("type", ""),
        spec.get("externalTrafficPolicy", ""),
        spec.get("loadBalancerClass"),
        meta.get("annotations") or None,
        meta.get("deletionTimestamp"),
    ]
    if spec.get("loadBalancerSourceRanges"):
        op.append(list(spec["loadBalancerSourceRanges"]))
    return hashlib.sha224(_yaml(_remove(op)).encode()).hexdigest()


def _zero(value: Any) -> bool:
    """``isUnderlyingTypeZero`` on JSON values."""
    return value is None or value == "" or value == 0 or value is False or value in ([], {})


def _remove(value: Any, top: bool = True) -> Any:
    """``hash.remove``: maps lose zero values and the reconcile-hash key, in place (so at any
    depth); a list is filtered only at the top (Go assigns a nested list's copy to a local)."""
    if isinstance(value, list):
        items = [_remove(item, top=False) for item in value]
        return [item for item in items if not _zero(item)] if top else items
    if isinstance(value, dict):
        return {
            k: _remove(v, top=False)
            for k, v in value.items()
            if k != RECONCILE_HASH_LABEL and not _zero(v)
        }
    return value


# -- gopkg.in/yaml.v2 v2.4.0's emitter, for these shapes -----------------------------------------

_BOOLS_NULLS = frozenset(
    {
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "true",
        "True",
        "TRUE",
        "on",
        "On",
        "ON",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "false",
        "False",
        "FALSE",
        "off",
        "Off",
        "OFF",
        "~",
        "null",
        "Null",
        "NULL",
        ".nan",
        ".NaN",
        ".NAN",
        ".inf",
        ".Inf",
        ".INF",
        "+.inf",
        "+.Inf",
        "+.INF",
        "-.inf",
        "-.Inf",
        "-.INF",
    }
)
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BASE60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+)")
_DATE = r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
_TIME = r"[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?"
_TIMESTAMP = re.compile(rf"{_DATE}|{_DATE}[Tt]{_TIME}(Z|[-+][0-9]{{2}}:[0-9]{{2}})|{_DATE} {_TIME}")


def _resolves_to_other(s: str) -> bool:
    """``resolve("", s)`` is not ``!!str``, or ``isBase60Float(s)``: not written plain."""
    if s == "" or s in _BOOLS_NULLS:
        return True
    if s[0] == ".":
        return bool(re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", s))
    if s[0] not in "+-0123456789":
        return False
    if _TIMESTAMP.fullmatch(s) or (":" in s and _BASE60.fullmatch(s)):
        return True
    plain = s.replace("_", "")
    return bool(_FLOAT.fullmatch(plain) or _INT.fullmatch(plain))


def _printable(ch: str) -> bool:
    o = ord(ch)
    return (
        o == 0x0A
        or 0x20 <= o <= 0x7E
        or 0xA0 <= o <= 0xD7FF
        or (0xE000 <= o <= 0xFFFD and o != 0xFEFF)
    )


def _analyse(s: str) -> tuple[bool, bool, bool]:
    """``yaml_emitter_analyze_scalar``: (block plain allowed, single quoted allowed,
    multiline)."""
    if s == "":
        return True, True, False
    block_ind = s.startswith(("---", "..."))
    space_break = break_space = special = False
    prev_space = prev_break = False
    preceded_ws = True
    for i, ch in enumerate(s):
        followed_ws = i + 1 >= len(s) or s[i + 1] in " \t"
        if i == 0:
            if ch in "#,[]{}&*!|>'\"%@`" or (ch in "?:-" and followed_ws):
                block_ind = True
        elif (ch == ":" and followed_ws) or (ch == "#" and preceded_ws):
            block_ind = True
        special = special or not _printable(ch)
        if ch == " ":
            break_space = break_space or prev_break
            prev_space, prev_break = True, False
        elif ch in "\r\n\x85\u2028\u2029":
            space_break = space_break or prev_space
            prev_space, prev_break = False, True
        else:
            prev_space = prev_break = False
        preceded_ws = ch in " \t\r\n\x85\u2028\u2029"
    multiline = any(c in s for c in "\r\n\x85\u2028\u2029")
    edges = s[0] in " \r\n\x85\u2028\u2029" or s[-1] in " \r\n\x85\u2028\u2029"
    plain = not (edges or break_space or space_break or special or multiline or block_ind)
    single = not (break_space or space_break or special)
    return plain, single, multiline


_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
    "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip


class _Writer:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0

    def put(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)

    def indent(self, indent: int) -> None:
        self.out.append("\n")
        self.column = 0
        self.put(" " * indent)

    def scalar(self, s: str, indent: int, key: bool = False) -> None:
        """``stringv`` + ``select_scalar_style`` + the writers (a value after ``: `` or
        ``- ``; continuation lines at ``indent``)."""
        plain, single, multiline = _analyse(s)
        if "\n" in s and not key:
            self._literal(s, indent)
        elif not _resolves_to_other(s) and plain and not (key and multiline):
            self._folded(s, indent, quote="", breaks=not key)
        elif single and not (key and multiline) and not _resolves_to_other(s):
            self._folded(s, indent, quote="'", breaks=not key)
        else:
            self._double(s, indent, breaks=not key)

    def _folded(self, s: str, indent: int, quote: str, breaks: bool) -> None:
        self.put(quote)
        spaces = line_break = False
        for i, ch in enumerate(s):
            if ch in "\u2028\u2029":  # a printable line break: kept, the next line indented
                self.out.append(ch)
                self.column, line_break = 0, True
                continue
            if ch != " " and line_break:
                self.put(" " * indent)
                line_break = False
            if ch == " ":
                inner = not quote or 0 < i < len(s) - 1
                nxt = s[i + 1] if i + 1 < len(s) else ""
                if breaks and not spaces and self.column > _BEST_WIDTH and inner and nxt != " ":
                    self.indent(indent)
                else:
                    self.put(ch)
                spaces = True
            else:
                self.put("''" if ch == "'" and quote else ch)
                spaces = False
        self.put(quote)

    def _double(self, s: str, indent: int, breaks: bool) -> None:
        self.put('"')
        spaces = False
        for i, ch in enumerate(s):
            if not _printable(ch) or ch in '\ufeff\r\n\x85\u2028\u2029"\\':
                o = ord(ch)
                if ch in _ESCAPES:
                    self.put("\\" + _ESCAPES[ch])
                elif o <= 0xFF:
                    self.put(f"\\x{o:02X}")
                elif o <= 0xFFFF:
                    self.put(f"\\u{o:04X}")
                else:
                    self.put(f"\\U{o:08X}")
                spaces = False
            elif ch == " ":
                if breaks and not spaces and self.column > _BEST_WIDTH and 0 < i < len(s) - 1:
                    self.indent(indent)
                    if s[i + 1] == " ":
                        self.put("\\")
                else:
                    self.put(ch)
                spaces = True
            else:
                self.put(ch)
                spaces = False
        self.put('"')

    def _literal(self, s: str, indent: int) -> None:
        hints = "|"
        if s[0] in " \n":
            hints += "2"
        if not s.endswith("\n"):
            hints += "-"
        elif s == "\n" or s.endswith("\n\n"):
            hints += "+"
        self.put(hints)
        lines = s.split("\n")
        for line in lines[:-1] if s.endswith("\n") else lines:
            self.out.append("\n")
            self.column = 0
            if line:
                self.put(" " * indent + line)

    def node(self, value: Any, indent: int, in_seq: bool) -> None:
        """A block node whose first line continues the current one (after ``- ``)."""
        if isinstance(value, list):
            self.sequence(value, indent)
        elif isinstance(value, dict):
            self.mapping(value, indent)
        elif isinstance(value, str):
            self.scalar(value, indent)
        else:
            self.put(str(value))

    def sequence(self, items: list[Any], indent: int) -> None:
        if not items:
            self.put("[]")
            return
        for n, item in enumerate(items):
            if n:
                self.indent(indent)
            self.put("- ")
            self.node(item, indent + 2, in_seq=True)

    def mapping(self, items: dict[str, Any], indent: int) -> None:
        if not items:
            self.put("{}")
            return
        for n, key in enumerate(sorted(items, key=_NaturalKey)):
            if n:
                self.indent(indent)
            if len(key.encode()) > _SIMPLE_KEY_BYTES or _analyse(key)[2]:
                self.put("? ")  # a complex key: a block scalar, then ':' on a line of its own
                self.scalar(key, indent + 2)
                self.indent(indent)
            else:
                self.scalar(key, indent + 2, key=True)
            self.put(":")
            value = items[key]
            if isinstance(value, list) and value:
                self.indent(indent)
                self.sequence(value, indent)
            elif isinstance(value, dict) and value:
                self.indent(indent + 2)
                self.mapping(value, indent + 2)
            else:
                self.put(" ")
                self.node(value, indent + 2, in_seq=False)


class _NaturalKey:
    """yaml.v2 ``keyList.Less`` for string keys: letters before other runes, digit runs
    compared as numbers."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __lt__(self, other: _NaturalKey) -> bool:
        return _natural_less(self.key, other.key)


def _natural_less(a: str, b: str) -> bool:
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            continue
        al, bl = a[i].isalpha(), b[i].isalpha()
        if al and bl:
            return a[i] < b[i]
        if al or bl:
            return bl
        an = bn = 0
        if a[i] == "0" or b[i] == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an, ai = an * 10 + int(a[ai]), ai + 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn, bi = bn * 10 + int(b[bi]), bi + 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return a[i] < b[i]
    return len(a) < len(b)


def _yaml(value: Any) -> str:
    """``sigs.k8s.io/yaml.Marshal`` of the filtered list."""
    if not value:
        return "null\n"  # the filtered list is Go's nil slice
    writer = _Writer()
    writer.node(value, 0, in_seq=False)
    return "".join(writer.out) + "\n"
