from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from pathlib import Path

import pytest

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import Manager, _listen_error, init_provider


@pytest.mark.parametrize(
    ("provider", "config_text", "message"),
    [
        pytest.param("fake", None, "cannot read", id="unreadable-cloud-config"),
        pytest.param("no-such-cloud", "", "no-such-cloud", id="unknown-provider"),
        pytest.param(
            "fake", "[Global]\ndisable = teleport\n", "teleport", id="invalid-cloud-config"
        ),
        pytest.param("external", "", "selects no provider", id="external-is-not-a-provider"),
    ],
)
def test_provider_init_problems_are_configuration_errors(
    tmp_path: Path, provider: str, config_text: str | None, message: str
) -> None:
    path = tmp_path / "cloud.conf"
    if config_text is not None:
        path.write_text(config_text)
    config = ManagerConfig(cloud_provider=provider, cloud_config=str(path))
    with pytest.raises(ConfigurationError, match=message):
        init_provider(config)


def test_fake_provider_from_its_cloud_config(tmp_path: Path) -> None:
    path = tmp_path / "cloud.conf"
    path.write_text('[Instance "n1"]\naddress = InternalIP=10.1.1.1\n')
    cloud = init_provider(ManagerConfig(cloud_provider="fake", cloud_config=str(path)))
    assert cloud.provider_name() == "fake"


# -- start-up and shutdown paths of the Manager ---------------------------------------------------


class Provider:
    """Stands in for the gated cloud: ``initialize`` returns, fails or never returns."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def initialize(self, client_builder: object, stop: asyncio.Event) -> None:
        if self.behaviour == "fails":
            raise RuntimeError("no credentials")
        if self.behaviour == "hangs":
            await asyncio.Event().wait()
        if self.behaviour == "ignores-cancel":
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
            await asyncio.Event().wait()


def _manager(grace: float = 0.05) -> Manager:
    return Manager(ManagerConfig(cloud_provider="fake", shutdown_grace=grace))


async def test_initialize_that_returns_lets_the_start_go_on() -> None:
    stop = asyncio.Event()
    assert await _manager()._initialize(Provider("returns"), stop)  # type: ignore[arg-type]


async def test_initialize_failure_propagates() -> None:
    with pytest.raises(RuntimeError, match="no credentials"):
        await _manager()._initialize(Provider("fails"), asyncio.Event())  # type: ignore[arg-type]


@pytest.mark.parametrize("behaviour", ["hangs", "ignores-cancel"])
async def test_a_stop_signal_abandons_a_hung_initialize(behaviour: str) -> None:
    stop = asyncio.Event()
    stop.set()
    manager = _manager(grace=0.05)
    async with asyncio.timeout(5):
        started = await manager._initialize(Provider(behaviour), stop)  # type: ignore[arg-type]
    assert started is False
    for task in asyncio.all_tasks():
        if task.get_name() == "provider-initialize":
            task.cancel()  # the test's own loop must end clean


def test_a_skipped_controller_is_not_blamed_on_the_provider(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = _manager()
    with caplog.at_level(logging.INFO, logger="kccm.manager"):
        manager._register("node-route-controller", None)
    assert manager.skipped == ["node-route-controller"]
    assert [r.getMessage() for r in caplog.records] == ["Skipping 'node-route-controller'"]


@pytest.mark.parametrize(
    ("address", "code", "message"),
    [
        pytest.param(
            "0.0.0.0",
            errno.EADDRINUSE,
            "--secure-port: cannot listen on 0.0.0.0:10258: the address is already in use",
            id="in-use",
        ),
        pytest.param(
            "10.99.0.1",
            errno.EADDRNOTAVAIL,
            "--secure-port: cannot listen on 10.99.0.1:10258: the address is not one of this",
            id="not-local",
        ),
        pytest.param("::1", errno.EACCES, "[::1]:10258: permission denied", id="ipv6-privileged"),
    ],
)
def test_listen_errors_are_one_line(address: str, code: int, message: str) -> None:
    text = _listen_error(address, 10258, OSError(code, os.strerror(code)))
    assert message in text
    assert "\n" not in text
