"""Test-side boto3 clients of a moto emulator, made once per emulator, and botocore's service
models parsed once per process."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import botocore.loaders

__all__ = [
    "CREDENTIALS",
    "REGION",
    "ZONES",
    "client",
    "clients",
    "forget",
    "remember",
    "shared_loader",
]

REGION = "eu-west-1"
ZONES = ("eu-west-1a", "eu-west-1b")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

_LIVE: dict[str, dict[str, Any]] = {}
"""The moto emulators this process started, by URL, each with the test-side clients made for
it so far (by service)."""
_LIVE_LOCK = threading.Lock()


def remember(url: str) -> None:
    """Keep the clients made for ``url`` from now on (an emulator started)."""
    with _LIVE_LOCK:
        _LIVE[url] = {}


def forget(url: str) -> None:
    """Close and drop the clients made for ``url`` (its emulator stopped)."""
    with _LIVE_LOCK:
        made = _LIVE.pop(url, {})
    for made_client in made.values():
        made_client.close()


def client(url: str, service: str) -> Any:
    """A test-side boto3 client of ``service`` talking to ``url`` directly: made once per
    running emulator (boto3 clients are thread-safe, and making one costs tens of
    milliseconds), anew for any other URL."""
    with _LIVE_LOCK:
        made = _LIVE.get(url)
        if made is not None and service in made:
            return made[service]
    new = boto3.client(
        service,
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    with _LIVE_LOCK:
        made = _LIVE.get(url)
        if made is None:
            return new
        kept = made.setdefault(service, new)
    if kept is not new:
        new.close()
    return kept


def clients(url: str) -> tuple[Any, Any]:
    """Test-side (ec2, elbv2) clients talking to ``url`` directly."""
    return client(url, "ec2"), client(url, "elbv2")


_LOADERS: dict[str | None, Any] = {}


def shared_loader(search_path_string: str | None = None) -> Any:
    """:func:`botocore.loaders.create_loader`, made once per search path and process: a
    stand-in for it in ``botocore.session`` (tests patch it there) lets every new boto3
    session parse botocore's service models (ec2's is megabytes of JSON) once, as the clients
    of one session already do, instead of again each time; seconds per test otherwise. The
    sessions, their credentials and clients are still each AWSCloud's own."""
    with _LIVE_LOCK:
        loader = _LOADERS.get(search_path_string)
        if loader is None:
            loader = _LOADERS[search_path_string] = botocore.loaders.create_loader(
                search_path_string
            )
        return loader
