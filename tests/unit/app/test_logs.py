from __future__ import annotations

import json
import logging

import pytest

from kccm.app.logs import KlogJsonFormatter, KlogTextFormatter, RedactSecrets, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "Authorization: Bearer abc.def-123",
            "Authorization: Bearer [REDACTED]",
            id="bearer-token",
        ),
        pytest.param("api_key=s3cr3t zone=a", "api_key=[REDACTED] zone=a", id="api-key"),
        pytest.param('password: "p w"', "password: [REDACTED]", id="quoted-password"),
        pytest.param("client-token=xyz", "client-token=[REDACTED]", id="dashed-token-key"),
        pytest.param(
            "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----",
            "[REDACTED PRIVATE KEY]",
            id="pem-private-key",
        ),
        pytest.param(
            "zone=us-east-1a region=us-east-1",
            "zone=us-east-1a region=us-east-1",
            id="harmless-text-unchanged",
        ),
    ],
)
def test_redaction(text: str, expected: str) -> None:
    assert redact(text) == expected


def _record(msg: str, *args: object, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("kccm.test", level, "/x/manager.py", 42, msg, args, None)


def test_filter_rewrites_formatted_message() -> None:
    record = _record("token=%s", "abc")
    assert RedactSecrets().filter(record)
    assert record.getMessage() == "token=[REDACTED]"


def test_klog_text_line() -> None:
    line = KlogTextFormatter().format(_record("Started %r", "x", level=logging.WARNING))
    assert line.startswith("W")
    assert line.endswith("manager.py:42] Started 'x'")


def test_klog_json_line() -> None:
    entry = json.loads(KlogJsonFormatter().format(_record("hello", level=logging.ERROR)))
    assert entry["msg"] == "hello"
    assert entry["caller"] == "manager.py:42"
    assert "err" in entry
