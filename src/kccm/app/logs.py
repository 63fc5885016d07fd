"""klog-compatible logging: text by default, JSON with ``--logging-format=json``, ``-v``.

Text lines look like klog's::

    I1121 05:17:56.621445    4034 manager.py:137] Starting cloud-controller-manager

JSON lines carry ``ts`` (epoch seconds), ``caller``, ``msg``, ``v`` and, for errors,
``err``, like component-base's JSON format. ``-v=N`` maps onto Python levels: V(0) is INFO,
V(2) and above let kccm's debug-level messages through from V(4) (``--vmodule=pattern=N``
does the same for the source files whose name matches). Transport libraries' debug traces
(aiohttp, httpx, hpack, h2, ...) stay muted below -v=9. A redaction filter keeps bearer
tokens, private keys and values of secret-looking keys out of every line.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import TextIO

__all__ = [
    "HTTP_LIBRARIES",
    "KlogJsonFormatter",
    "KlogTextFormatter",
    "RedactSecrets",
    "VModule",
    "setup_logging",
]

_LEVEL_LETTER = {"DEBUG": "I", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "F"}
_REDACTIONS = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9\-._~+/]+=*"), r"\1[REDACTED]"),
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        "[REDACTED PRIVATE KEY]",
    ),
    (
        re.compile(
            r"(?i)\b((?:[a-z_-]*)(?:password|passwd|secret|token|api[_-]?key|credentials?)"
            r"[a-z_-]*)([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
        ),
        r"\1\2[REDACTED]",
    ),
)


def _may_hold_a_secret(lowered: str) -> bool:
    """False when the lower-cased message holds none of the words every pattern above needs
    ("private key" holds "key"): most lines, checked far cheaper than by the three patterns."""
    return (
        "key" in lowered
        or "token" in lowered
        or "secret" in lowered
        or "passw" in lowered
        or "bearer" in lowered
        or "credential" in lowered
    )


def redact(text: str) -> str:
    if not _may_hold_a_secret(text.lower()):
        return text
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites every record's message with secrets masked (never drops a record). The record
    keeps the merged message (``args`` None), so the formatter does not merge it again."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True


class KlogTextFormatter(logging.Formatter):
    _second: tuple[int, str] = (-1, "")

    def _stamp(self, created: float) -> str:
        """``MMDD hh:mm:ss`` of ``created``, formatted once per second."""
        second = int(created)
        if self._second[0] != second:
            self._second = (second, time.strftime("%m%d %H:%M:%S", time.localtime(second)))
        return self._second[1]

    def format(self, record: logging.LogRecord) -> str:
        micros = int((record.created % 1) * 1_000_000)
        letter = _LEVEL_LETTER.get(record.levelname, "I")
        head = (
            f"{letter}{self._stamp(record.created)}.{micros:06d} "
            f"{record.process or os.getpid():>7} {record.filename}:{record.lineno}]"
        )
        line = f"{head} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + redact(self.formatException(record.exc_info))
        return line


class KlogJsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 6),
            "caller": f"{record.filename}:{record.lineno}",
            "msg": record.getMessage(),
            "v": 0 if record.levelno >= logging.INFO else 4,
            "logger": record.name,
        }
        if record.levelno >= logging.ERROR:
            entry["err"] = redact(self.formatException(record.exc_info)) if record.exc_info else ""
        elif record.levelno == logging.WARNING:
            entry["level"] = "warning"
        return json.dumps(entry, default=str)


# third-party transport libraries whose DEBUG output is a per-frame trace (hpack, h2, ...):
# muted unless -v >= TRACE_VERBOSITY (klog's level for dumping whole requests)
HTTP_LIBRARIES = (
    "aiohttp",
    "anyio",
    "asyncio",
    "charset_normalizer",
    "h11",
    "h2",
    "hpack",
    "httpcore",
    "httpcore2",
    "httpx",
    "httpx2",
    "lightkube",
    "urllib3",
)
TRACE_VERBOSITY = 9
DEBUG_VERBOSITY = 4


class VModule(logging.Filter):
    """klog ``--vmodule``: debug records pass when ``-v`` or their file's pattern allows."""

    def __init__(self, verbosity: int, patterns: Sequence[tuple[str, int]] = ()) -> None:
        super().__init__()
        self.verbosity = verbosity
        self.patterns = tuple(patterns)

    def level_for(self, filename: str) -> int:
        stem = filename.rsplit(".", 1)[0]
        for pattern, level in self.patterns:
            if fnmatch.fnmatchcase(stem, pattern) or fnmatch.fnmatchcase(filename, pattern):
                return level
        return self.verbosity

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        return self.level_for(record.filename) >= DEBUG_VERBOSITY


class _Below(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


def _handler(stream: TextIO, fmt: str, *selectors: logging.Filter) -> logging.Handler:
    """A handler whose selectors decide first; only what they let through is redacted."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KlogJsonFormatter() if fmt == "json" else KlogTextFormatter())
    for selector in selectors:
        handler.addFilter(selector)
    handler.addFilter(RedactSecrets())
    return handler


def setup_logging(
    verbosity: int = 0,
    fmt: str = "text",
    *,
    vmodule: Sequence[tuple[str, int]] = (),
    split_stream: bool = False,
) -> None:
    """Configure the root logger once for the daemon (stderr, as klog; with ``split_stream``
    errors go to stderr and everything else to stdout)."""
    selector = VModule(verbosity, vmodule)
    handlers = [_handler(sys.stderr, fmt, selector)]
    if split_stream:
        handlers[0].setLevel(logging.ERROR)
        handlers.append(_handler(sys.stdout, fmt, selector, _Below(logging.ERROR)))
    # No line shows a thread, process or task name: a record need not look them up (about a
    # fifth of the cost of a line; the process id stays, it is in every text line).
    logging.logThreads = False
    logging.logMultiprocessing = False
    if sys.version_info >= (3, 12):
        logging.logAsyncioTasks = False
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for handler in handlers:
        root.addHandler(handler)
    most = max([verbosity, *(level for _, level in vmodule)])
    root.setLevel(logging.DEBUG if most >= DEBUG_VERBOSITY else logging.INFO)
    library_level = logging.DEBUG if verbosity >= TRACE_VERBOSITY else logging.WARNING
    for name in HTTP_LIBRARIES:
        logging.getLogger(name).setLevel(library_level)
