"""Backend lists kept once, not once per balancer: the load balancers of one cluster all send
to the same nodes, so 3,000 balancers over 10,000 nodes share one list of 10,000 backends.

- In the state file (schema version 2) a list is a ``backend_sets`` row, its id the SHA-256 of
  its canonical JSON (:func:`set_id`); each ``load_balancers`` row names its set.
- In memory, :func:`canonical_text` and :func:`set_id` remember the last few lists by identity
  (:class:`~kccm.cloudprovider.backends.IdentityMemo`): the provider hands every ensure of one
  node-set version the same tuple (:class:`NodeBackends`) and the store hands every read of
  one set the same parsed tuple (:class:`ParsedSets`), so comparing a balancer's backends
  with the desired ones is a string comparison, not 10,000 dicts serialised twice per ensure.

Each is made by one thread while the others asking for it wait: when the node set changes,
the ten service workers all ensure with the new tuple at once, and each used to take its
10,000 backends (and serialise and hash them) itself, ten times the work, and ten threads
queueing for the GIL that the health server's thread needs too (issue 28). A thread waiting on
the lock does not hold the GIL.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider.backends import IdentityMemo

__all__ = [
    "Backends",
    "NodeBackends",
    "ParsedSets",
    "canonical_text",
    "dumps",
    "set_id",
]

Backends = tuple[Mapping[str, Any], ...]
REMEMBERED = 8
"""Distinct lists remembered (the node set rarely has more than one or two versions live)."""


def dumps(value: Any) -> str:
    """The state file's canonical JSON: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_TEXTS: IdentityMemo[Sequence[Mapping[str, Any]], tuple[str, str]] = IdentityMemo(REMEMBERED)


def _text_and_id(backends: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    text = dumps(list(backends))
    return text, hashlib.sha256(text.encode()).hexdigest()


def canonical_text(backends: Sequence[Mapping[str, Any]]) -> str:
    """``backends`` as the state file's canonical JSON (remembered for the last few tuples)."""
    if not isinstance(backends, tuple):
        return dumps(list(backends))
    return _TEXTS.get(backends, _text_and_id)[0]


def set_id(backends: Sequence[Mapping[str, Any]]) -> str:
    """The ``backend_sets`` id of ``backends``: the SHA-256 of its canonical JSON."""
    if not isinstance(backends, tuple):
        return _text_and_id(backends)[1]
    return _TEXTS.get(backends, _text_and_id)[1]


class NodeBackends:
    """``backends_of(nodes)`` once per node list: the service controller hands every ensure of
    one node-set version the same tuple, so its backends are taken once, not once per
    balancer (10,000 nodes x 3,000 balancers). Only a tuple is remembered (by identity); a
    list may change between calls."""

    def __init__(self, backends_of: Callable[[Sequence[Any]], Backends]) -> None:
        self._backends_of = backends_of
        self._memo: IdentityMemo[Sequence[Any], Backends] = IdentityMemo(REMEMBERED)

    def __call__(self, nodes: Sequence[Any]) -> Backends:
        if not isinstance(nodes, tuple):
            return self._backends_of(nodes)
        return self._memo.get(nodes, self._backends_of)


class ParsedSets:
    """A reader's parsed ``backend_sets``: the same text gives the same tuple, parsed once (under
    the lock: a restart's workers reading one set wait for one parse). The text is compared on
    every read, so a set edited in the state file is seen at once."""

    def __init__(self, parse: Callable[[str], Any] = lambda text: tuple(json.loads(text))):
        self._parse = parse
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, Any]] = OrderedDict()

    def get(self, ident: str, text: str) -> Any:
        with self._lock:
            found = self._entries.get(ident)
            if found is not None and found[0] == text:
                self._entries.move_to_end(ident)
                return found[1]
            parsed = self._parse(text)
            self._entries[ident] = (text, parsed)
            while len(self._entries) > REMEMBERED:
                self._entries.popitem(last=False)
        return parsed
