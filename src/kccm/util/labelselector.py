"""Kubernetes label selectors in their string form (``a=b,c!=d,e in (x,y),!f``).

:func:`parse` follows apimachinery's ``labels.Parse`` (``pkg/labels/selector.go``, v0.36):
the same lexer (whitespace separates; ``= == != ! ( ) , > <`` are symbols; every other run of
characters is an identifier, ``in`` and ``notin`` are keywords where an operator is expected),
the same grammar (comma-separated requirements: ``key``, ``!key``, ``key=value``,
``key==value``, ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N``,
``key<N``), and the same validation (qualified-name keys, label values of at most 63
characters, a non-empty set for ``in``/``notin``, an integer for ``>``/``<``). The error
messages are kccm's own, each naming what was found and what was expected.

:meth:`Selector.matches` is ``Requirement.Matches``: ``!=`` and ``notin`` also match a Node
without the label; ``>``/``<`` need the label and an integer value. The empty string is the
empty selector, which matches every label set (as upstream's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Requirement", "Selector", "SelectorError", "parse"]

_SYMBOLS = ("!=", "==", "!", "(", ")", ",", "=", ">", "<")
_SYMBOL_START = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_INTEGER = re.compile(r"^[-+]?[0-9]+$")
_IN, _NOTIN = "in", "notin"
_OPERATORS = ("=", "==", "!=", ">", "<", _IN, _NOTIN)


class SelectorError(ValueError):
    """The selector does not parse or a requirement is invalid; the message says why."""


@dataclass(frozen=True)
class Requirement:
    """One requirement: ``operator`` is one of ``= == != in notin exists !exists > <``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, present = self.operator, self.key in labels
        if op in ("=", "==", _IN):
            return present and labels[self.key] in self.values
        if op in ("!=", _NOTIN):
            return not present or labels[self.key] not in self.values
        if op == "exists":
            return present
        if op == "!exists":
            return not present
        if not present or not _INTEGER.match(labels[self.key]):
            return False
        have, bound = int(labels[self.key]), int(self.values[0])
        return have > bound if op == ">" else have < bound

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!exists":
            return "!" + self.key
        if self.operator in (_IN, _NOTIN):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


@dataclass(frozen=True)
class Selector:
    """Every requirement must match (an empty selector matches everything)."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# -- lexer ------------------------------------------------------------------------------------

_END = ""


def _tokens(text: str) -> list[str]:
    """Symbols and identifiers, in order; whitespace dropped. The end is ``""``."""
    found: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch in _SYMBOL_START:
            symbol = next(s for s in _SYMBOLS if text.startswith(s, i))
            found.append(symbol)
            i += len(symbol)
        else:
            start = i
            while i < len(text) and text[i] not in _WHITESPACE and text[i] not in _SYMBOL_START:
                i += 1
            found.append(text[start:i])
    return found


def _shown(token: str) -> str:
    return "end of string" if token == _END else repr(token)


def _identifier(token: str) -> bool:
    return token != _END and token not in _SYMBOLS


# -- parser -----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else _END

    def take(self) -> str:
        token = self.peek()
        self.at += 1
        return token

    def selector(self) -> Selector:
        found: list[Requirement] = []
        while True:
            token = self.peek()
            if token == _END:
                return Selector(tuple(found))
            if token != "!" and not _identifier(token):
                raise SelectorError(f"found {_shown(token)}, expected: !, a key or end of string")
            found.append(self.requirement())
            after = self.take()
            if after == _END:
                return Selector(tuple(found))
            if after != ",":
                raise SelectorError(f"found {_shown(after)}, expected: ',' or end of string")
            following = self.peek()
            if following != "!" and not _identifier(following):
                raise SelectorError(f"found {_shown(following)}, expected: a key after ','")

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return _checked(Requirement(self.key(), "!exists"))
        key = self.key()
        if self.peek() in (_END, ","):
            return _checked(Requirement(key, "exists"))
        operator = self.take()
        if operator not in _OPERATORS:
            wanted = ", ".join(_OPERATORS)
            raise SelectorError(f"found {_shown(operator)} after key {key!r}, expected: {wanted}")
        values = self.value_set() if operator in (_IN, _NOTIN) else (self.exact_value(),)
        return _checked(Requirement(key, operator, values))

    def key(self) -> str:
        token = self.take()
        if not _identifier(token):
            raise SelectorError(f"found {_shown(token)}, expected: a key")
        return token

    def exact_value(self) -> str:
        if self.peek() in (_END, ","):
            return ""
        token = self.take()
        if not _identifier(token):
            raise SelectorError(f"found {_shown(token)}, expected: a value")
        return token

    def value_set(self) -> tuple[str, ...]:
        opening = self.take()
        if opening != "(":
            raise SelectorError(f"found {_shown(opening)}, expected: '('")
        values: list[str] = []
        if self.peek() == ")":
            self.take()
            return ()
        while True:
            token = self.peek()
            if _identifier(token):
                values.append(self.take())
                token = self.peek()
            else:
                values.append("")  # ``(,a)`` or ``(a,,b)``: upstream reads an empty value
            if token == ")":
                self.take()
                return tuple(values)
            if token != ",":
                raise SelectorError(f"found {_shown(token)}, expected: ',' or ')'")
            self.take()
            if self.peek() == ")":  # ``(a,)``: upstream reads an empty value last
                self.take()
                return (*values, "")


def _checked(requirement: Requirement) -> Requirement:
    """Upstream ``NewRequirement``'s validation."""
    _check_key(requirement.key)
    op, values = requirement.operator, requirement.values
    if op in (_IN, _NOTIN) and not values:
        raise SelectorError(f"{requirement.key}: '{op}' needs at least one value")
    if op in (">", "<") and not _INTEGER.match(values[0]):
        raise SelectorError(f"{requirement.key}: '{op}' needs an integer, not {values[0]!r}")
    for value in values:
        _check_value(requirement.key, value)
    return requirement


def _check_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise SelectorError(f"invalid key {key!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(
            f"invalid key {key!r}: the name must be 1 to 63 characters, alphanumerics, '-', "
            "'_' or '.', starting and ending with an alphanumeric"
        )


def _check_value(key: str, value: str) -> None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise SelectorError(
            f"invalid value {value!r} for key {key!r}: at most 63 characters, alphanumerics, "
            "'-', '_' or '.', starting and ending with an alphanumeric"
        )


def parse(text: str) -> Selector:
    """The selector ``text`` says; :class:`SelectorError` when it does not parse or is
    invalid."""
    return _Parser(text).selector()
