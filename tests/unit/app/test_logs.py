from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from kccm.app.logs import (
    HTTP_LIBRARIES,
    KlogJsonFormatter,
    KlogTextFormatter,
    RedactSecrets,
    redact,
    setup_logging,
)


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
            "{'password': 'hunter2', 'zone': 'a'}",
            "{'password': [REDACTED], 'zone': 'a'}",
            id="python-dict",
        ),
        pytest.param(
            '{"apiKey": "k1", "zone": "a"}', '{"apiKey": [REDACTED], "zone": "a"}', id="json"
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


def test_filter_keeps_a_harmless_message_merged() -> None:
    record = _record("Initializing node %s with cloud provider", "node-1")
    assert RedactSecrets().filter(record)
    assert (record.msg, record.args) == ("Initializing node node-1 with cloud provider", None)


def _failed_record(level: int) -> logging.LogRecord:
    try:
        raise RuntimeError("401 for Authorization: Bearer abc.def password=hunter2")
    except RuntimeError:
        record = _record("request failed", level=level)
        record.exc_info = sys.exc_info()
    return record


@pytest.mark.parametrize(
    "formatter",
    [pytest.param(KlogTextFormatter(), id="text"), pytest.param(KlogJsonFormatter(), id="json")],
)
def test_a_traceback_is_redacted_too(formatter: logging.Formatter) -> None:
    line = formatter.format(_failed_record(logging.ERROR))
    assert "RuntimeError" in line
    assert "abc.def" not in line
    assert "hunter2" not in line


def test_klog_text_line() -> None:
    line = KlogTextFormatter().format(_record("Started %r", "x", level=logging.WARNING))
    assert line.startswith("W")
    assert line.endswith("manager.py:42] Started 'x'")


def test_klog_json_line() -> None:
    entry = json.loads(KlogJsonFormatter().format(_record("hello", level=logging.ERROR)))
    assert entry["msg"] == "hello"
    assert entry["caller"] == "manager.py:42"
    assert "err" in entry


# -- setup_logging: verbosity, --vmodule, transport traces, split streams -----------------------


_RECORD_FLAGS = ("logThreads", "logMultiprocessing", "logAsyncioTasks")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {name: logging.getLogger(name).level for name in HTTP_LIBRARIES}
    flags = {name: getattr(logging, name) for name in _RECORD_FLAGS if hasattr(logging, name)}
    yield
    for name, value in flags.items():
        setattr(logging, name, value)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, lib_level in libraries.items():
        logging.getLogger(name).setLevel(lib_level)


def _emit(name: str, filename: str, level: int = logging.DEBUG) -> None:
    logger = logging.getLogger(name)
    record = logger.makeRecord(name, level, f"/x/{filename}", 1, "line from %s", (name,), None)
    if logger.isEnabledFor(level):
        logger.handle(record)


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize(
    ("verbosity", "vmodule", "emitted", "shown"),
    [
        pytest.param(
            4,
            (),
            [("kccm.controllers.service", "service.py"), ("hpack.hpack", "hpack.py")],
            ["kccm.controllers.service"],
            id="v4-shows-kccm-debug-not-hpack-frames",
        ),
        pytest.param(
            4,
            (),
            [("httpcore2.http11", "http11.py"), ("aiohttp.client", "client.py")],
            [],
            id="v4-mutes-http-client-traces",
        ),
        pytest.param(
            9,
            (),
            [("hpack.hpack", "hpack.py")],
            ["hpack.hpack"],
            id="v9-lets-transport-traces-through",
        ),
        pytest.param(
            2,
            (("service", 4),),
            [("kccm.controllers.service", "service.py"), ("kccm.controllers.node", "node.py")],
            ["kccm.controllers.service"],
            id="vmodule-raises-one-file",
        ),
        pytest.param(
            4,
            (("node*", 0),),
            [("kccm.controllers.service", "service.py"), ("kccm.controllers.node", "node.py")],
            ["kccm.controllers.service"],
            id="vmodule-lowers-one-file",
        ),
        pytest.param(0, (), [("kccm.manager", "manager.py")], [], id="v0-no-debug"),
    ],
)
def test_verbosity_selects_debug_records(
    capsys: pytest.CaptureFixture[str],
    verbosity: int,
    vmodule: tuple[tuple[str, int], ...],
    emitted: list[tuple[str, str]],
    shown: list[str],
) -> None:
    setup_logging(verbosity, vmodule=vmodule)
    for name, filename in emitted:
        _emit(name, filename)
    err = capsys.readouterr().err
    assert [name for name, _ in emitted if f"line from {name}" in err] == shown


@pytest.mark.usefixtures("restore_logging")
def test_split_stream_sends_errors_to_stderr_and_the_rest_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(0, split_stream=True)
    _emit("kccm.a", "a.py", logging.INFO)
    _emit("kccm.b", "b.py", logging.WARNING)
    _emit("kccm.c", "c.py", logging.ERROR)
    out, err = capsys.readouterr()
    assert [name for name in ("kccm.a", "kccm.b", "kccm.c") if name in out] == ["kccm.a", "kccm.b"]
    assert [name for name in ("kccm.a", "kccm.b", "kccm.c") if name in err] == ["kccm.c"]


@pytest.mark.usefixtures("restore_logging")
def test_records_skip_what_no_line_shows() -> None:
    setup_logging(0)
    record = logging.getLogger("kccm.test").makeRecord(
        "kccm.test", logging.INFO, "/x/node.py", 1, "m", (), None
    )
    assert record.threadName is None
    assert record.processName is None
    assert record.process is not None  # the process id is in every text line


@pytest.mark.usefixtures("restore_logging")
def test_a_record_no_handler_shows_is_not_merged_or_redacted() -> None:
    setup_logging(0, vmodule=(("node", 4),))  # debug lines of node.py only
    dropped = _record("token=%s", "abc", level=logging.DEBUG)  # from manager.py
    shown = logging.LogRecord("kccm.test", logging.DEBUG, "/x/node.py", 1, "token=%s", ("a",), None)
    for record in (dropped, shown):
        for handler in logging.getLogger().handlers:
            handler.handle(record)
    assert (dropped.msg, dropped.args) == ("token=%s", ("abc",))  # the selector decided first
    assert (shown.msg, shown.args) == ("token=[REDACTED]", None)
