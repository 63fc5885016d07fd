"""The shared session manager client, as upstream vclib ``GetSharedToken`` calls it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kccm.emulators.vsphere.sessionmanager import FakeSessionManager
from kccm.providers.vsphere import sharedsession
from kccm.providers.vsphere.credentials import CredentialError
from kccm.providers.vsphere.sharedsession import (
    SharedSessionError,
    SharedTokenRefused,
    get_shared_token,
    safe_url,
)


@pytest.fixture
def manager() -> Iterator[FakeSessionManager]:
    with FakeSessionManager("secret-bearer", lambda: "ticket-1") as fake:
        yield fake


def test_bearer_token_buys_a_ticket(manager: FakeSessionManager) -> None:
    assert get_shared_token(manager.url, "secret-bearer") == "ticket-1"
    assert manager.requests == 1


def test_without_a_token_the_service_account_token_is_the_bearer(
    manager: FakeSessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "token"
    sa.write_text("secret-bearer")
    monkeypatch.setattr(sharedsession, "SA_TOKEN_FILE", str(sa))
    assert get_shared_token(manager.url, "") == "ticket-1"


def test_an_unreadable_service_account_token_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    with pytest.raises(CredentialError, match=f"service account token {missing} cannot be read"):
        get_shared_token("http://127.0.0.1:1/session", "", token_file=str(missing))


def test_a_wrong_token_is_refused_and_never_shown(manager: FakeSessionManager) -> None:
    with pytest.raises(SharedTokenRefused, match="invalid vc session manager response") as err:
        get_shared_token(manager.url + "?key=hunter2", "hunter2")
    assert "401 Unauthorized" in str(err.value)
    assert "hunter2" not in str(err.value)
    assert manager.refused == 1


class _Canned(BaseHTTPRequestHandler):
    status = 200
    body = b""

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, b"", "invalid vc session manager response from .*: 500"),
        (200, b"<html>", "failed decoding vc session manager response"),
        (200, json.dumps({"token": ""}).encode(), "returned vc session token .* is empty"),
        (200, json.dumps(["x"]).encode(), "returned vc session token .* is empty"),
    ],
    ids=["server-error", "not-json", "empty-token", "not-an-object"],
)
def test_bad_answers_are_clear_errors(status: int, body: bytes, message: str) -> None:
    handler = type("Handler", (_Canned,), {"status": status, "body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/session"
        with pytest.raises(SharedSessionError, match=message) as err:
            get_shared_token(url, "t")
        assert not isinstance(err.value, SharedTokenRefused)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("url", "message"),
    [("", "URL of session manager cannot be empty"), ("http://127.0.0.1:1/s", "failed calling")],
    ids=["no-url", "unreachable"],
)
def test_no_session_manager_is_an_error(url: str, message: str) -> None:
    with pytest.raises(SharedSessionError, match=message):
        get_shared_token(url, "t")


def test_safe_url_drops_what_may_be_secret() -> None:
    assert (
        safe_url("https://u:p@sm.example:8443/session?t=x#f") == "https://sm.example:8443/session"
    )
