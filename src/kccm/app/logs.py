"""klog-compatible logging: text by default, JSON with ``--logging-format=json``, ``-v``.

Text lines look like klog's::

    I1121 05:17:56.621445    4034 manager.py:137] Starting cloud-controller-manager

JSON lines carry ``ts`` (epoch seconds), ``caller``, ``msg``, ``v`` and, for errors,
``err``, like component-base's JSON format. ``-v=N`` maps onto Python levels: V(0) is INFO,
V(2) and above let kccm's debug-level messages through from V(4). A redaction filter keeps
bearer tokens, private keys and values of secret-looking keys out of every line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time

__all__ = ["KlogJsonFormatter", "KlogTextFormatter", "RedactSecrets", "setup_logging"]

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
            r"[a-z_-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
        ),
        r"\1\2[REDACTED]",
    ),
)


def redact(text: str) -> str:
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites every record's message with secrets masked (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class KlogTextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        letter = _LEVEL_LETTER.get(record.levelname, "I")
        head = (
            f"{letter}{time.strftime('%m%d %H:%M:%S', stamp)}.{micros:06d} "
            f"{record.process or os.getpid():>7} {record.filename}:{record.lineno}]"
        )
        line = f"{head} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
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
            entry["err"] = self.formatException(record.exc_info) if record.exc_info else ""
        elif record.levelno == logging.WARNING:
            entry["level"] = "warning"
        return json.dumps(entry, default=str)


def setup_logging(verbosity: int = 0, fmt: str = "text") -> None:
    """Configure the root logger once for the daemon (stderr, as klog)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KlogJsonFormatter() if fmt == "json" else KlogTextFormatter())
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)
    for noisy in ("aiohttp.access", "httpx", "httpx2", "httpcore", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
