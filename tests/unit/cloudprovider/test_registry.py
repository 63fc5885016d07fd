"""Provider selection by name: in-process registrations, entry points and module:factory."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TextIO

import pytest

from kccm.cloudprovider import (
    CloudProviderInitError,
    CloudProviderRegistry,
    DuplicateCloudProvider,
    Interface,
    UnknownCloudProvider,
    known_cloud_providers,
)
from kccm.providers.fake import FakeCloud

GROUP = "kccm.cloud_providers"
SEEN_CONFIGS: list[str | None] = []


def recording_factory(config: TextIO | None) -> Interface:
    SEEN_CONFIGS.append(None if config is None else config.read())
    return FakeCloud()


def failing_factory(config: TextIO | None) -> Interface:
    raise ValueError("missing [Global] section")


def returns_nothing(config: TextIO | None) -> Interface | None:
    return None


def registry_with(*points: tuple[str, str]) -> CloudProviderRegistry:
    eps = [EntryPoint(name, value, GROUP) for name, value in points]

    def source(group: str) -> Iterable[EntryPoint]:
        return [ep for ep in eps if ep.group == group]

    return CloudProviderRegistry(entry_point_source=source)


HERE = "test_registry"  # tests/unit/cloudprovider is on sys.path (rootdir-relative import)


def test_registered_factory_receives_the_config_stream(tmp_path: Path) -> None:
    registry = registry_with()
    registry.register("mine", recording_factory)
    config = tmp_path / "cloud.conf"
    config.write_text("[Global]\nzone = a\n")
    SEEN_CONFIGS.clear()
    assert isinstance(registry.init_cloud_provider("mine", config), FakeCloud)
    assert isinstance(registry.init_cloud_provider("mine", None), FakeCloud)
    assert SEEN_CONFIGS == ["[Global]\nzone = a\n", None]


@pytest.mark.parametrize(
    "name", [pytest.param("", id="empty-name"), pytest.param("external", id="external")]
)
def test_empty_and_external_select_no_provider(name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert registry_with().init_cloud_provider(name, None) is None
    logged = "External cloud provider specified" in caplog.text
    assert logged is (name == "external")


def test_registering_a_name_twice_is_an_error() -> None:
    registry = registry_with()
    registry.register("mine", recording_factory)
    with pytest.raises(
        DuplicateCloudProvider, match=r'^cloud provider "mine" was registered twice$'
    ):
        registry.register("mine", recording_factory)


def test_registering_over_an_entry_point_is_an_error() -> None:
    registry = registry_with(("mine", "nowhere:factory"))
    with pytest.raises(DuplicateCloudProvider, match='"mine" was registered twice'):
        registry.register("mine", recording_factory)


def test_two_entry_points_with_one_name_are_an_error() -> None:
    registry = registry_with(("mine", "a:factory"), ("mine", "b:factory"))
    with pytest.raises(DuplicateCloudProvider, match="entry points a:factory, b:factory"):
        registry.init_cloud_provider("mine", None)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("external", id="external"),
        pytest.param("a:b", id="module-reference"),
    ],
)
def test_reserved_names_cannot_be_registered(name: str) -> None:
    with pytest.raises(ValueError, match="invalid cloud provider name"):
        registry_with().register(name, recording_factory)


def test_unknown_name_lists_known_names_and_suggests_the_closest() -> None:
    registry = registry_with(("openstack", "x:y"))
    registry.register("fake", recording_factory)
    with pytest.raises(UnknownCloudProvider) as caught:
        registry.init_cloud_provider("fakee", None)
    assert str(caught.value) == (
        'unknown cloud provider "fakee" (known providers: fake, openstack); did you mean "fake"?'
    )


def test_unknown_name_without_any_provider() -> None:
    with pytest.raises(UnknownCloudProvider, match=r'^unknown cloud provider "x" \(none are'):
        registry_with().init_cloud_provider("x", None)


def test_get_cloud_provider_returns_none_for_unknown_names() -> None:
    assert registry_with().get_cloud_provider("nope", None) is None


def test_only_the_selected_entry_point_is_loaded() -> None:
    registry = registry_with(
        ("broken", "kccm_no_such_module:factory"),
        ("mine", f"{HERE}:recording_factory"),
    )
    assert isinstance(registry.init_cloud_provider("mine", None), FakeCloud)
    assert registry.known_names() == ["broken", "mine"]
    with pytest.raises(CloudProviderInitError, match=r'^could not init cloud provider "broken"'):
        registry.init_cloud_provider("broken", None)


def test_module_reference_names_a_factory() -> None:
    cloud = registry_with().init_cloud_provider(f"{HERE}:recording_factory", None)
    assert isinstance(cloud, FakeCloud)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param(
            f"{HERE}:failing_factory",
            f'could not init cloud provider "{HERE}:failing_factory": missing [Global] section',
            id="factory-error-is-wrapped",
        ),
        pytest.param(
            f"{HERE}:returns_nothing",
            f'unknown cloud provider "{HERE}:returns_nothing"',
            id="factory-returning-none",
        ),
        pytest.param(
            f"{HERE}:no_such_factory",
            f"could not init cloud provider \"{HERE}:no_such_factory\": module '{HERE}' has no "
            "attribute 'no_such_factory'",
            id="missing-attribute",
        ),
    ],
)
def test_init_errors_use_upstream_messages(name: str, message: str) -> None:
    with pytest.raises(CloudProviderInitError) as caught:
        registry_with().init_cloud_provider(name, None)
    assert str(caught.value) == message


def test_unreadable_config_file_is_reported(tmp_path: Path) -> None:
    registry = registry_with()
    registry.register("mine", recording_factory)
    missing = tmp_path / "absent.conf"
    with pytest.raises(
        CloudProviderInitError, match=r"^couldn't open cloud provider configuration"
    ):
        registry.init_cloud_provider("mine", missing)


def test_the_fake_is_installed_under_its_entry_point() -> None:
    assert "fake" in known_cloud_providers()


def test_selecting_fake_imports_no_other_provider_module() -> None:
    script = textwrap.dedent(
        """
        import sys
        from kccm.cloudprovider import init_cloud_provider, known_cloud_providers
        assert "kccm.providers.fake" not in sys.modules
        known = known_cloud_providers()
        cloud = init_cloud_provider("fake", None)
        # one entry per provider package (the fake is a package of several modules)
        loaded = sorted(
            {".".join(m.split(".")[:3]) for m in sys.modules if m.startswith("kccm.providers.")}
        )
        print(cloud.provider_name(), loaded, known)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    assert out.startswith("fake ['kccm.providers.fake']")


def test_config_stream_of_get_cloud_provider_is_passed_as_is() -> None:
    registry = registry_with()
    registry.register("mine", recording_factory)
    SEEN_CONFIGS.clear()
    registry.get_cloud_provider("mine", io.StringIO("x"))
    assert SEEN_CONFIGS == ["x"]
