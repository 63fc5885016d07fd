from __future__ import annotations

from pathlib import Path

import pytest

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import init_provider


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
