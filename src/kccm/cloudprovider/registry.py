"""Choosing a cloud provider by name (upstream ``plugins.go``).

Providers are found three ways, in this order:

1. ``register_cloud_provider(name, factory)`` called in-process;
2. the entry-point group ``kccm.cloud_providers`` of installed packages (Python's version of
   upstream's ``RegisterCloudProvider`` in an ``init()``); only the selected entry point is
   loaded, so no other provider's module (or cloud SDK) is ever imported;
3. a ``module:factory`` reference used directly as the name.

A factory receives the cloud config file as an open text stream, or ``None`` when no
``--cloud-config`` path was given, and returns the provider.
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import TextIO

from kccm.cloudprovider.errors import (
    CloudProviderInitError,
    DuplicateCloudProvider,
    UnknownCloudProvider,
)
from kccm.cloudprovider.interface import Interface

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTERNAL",
    "CloudProviderRegistry",
    "Factory",
    "default_registry",
    "get_cloud_provider",
    "init_cloud_provider",
    "is_cloud_provider",
    "is_external",
    "known_cloud_providers",
    "register_cloud_provider",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kccm.cloud_providers"
EXTERNAL = "external"

Factory = Callable[[TextIO | None], Interface | None]
"""Builds a provider from its config stream (``None`` when there is no config file)."""

EntryPointSource = Callable[[str], Iterable[EntryPoint]]


def _q(text: str) -> str:
    """Quote like Go's ``%q``."""
    return json.dumps(text)


def _installed_entry_points(group: str) -> Iterable[EntryPoint]:
    return entry_points(group=group)


def is_external(name: str) -> bool:
    """True for ``"external"`` (upstream ``IsExternal``)."""
    return name == EXTERNAL


class CloudProviderRegistry:
    """Provider names to factories; thread-safe."""

    def __init__(
        self,
        *,
        group: str = ENTRY_POINT_GROUP,
        entry_point_source: EntryPointSource = _installed_entry_points,
    ) -> None:
        self._group = group
        self._source = entry_point_source
        self._factories: dict[str, Factory] = {}
        self._lock = threading.Lock()

    def register(self, name: str, factory: Factory) -> None:
        """Register ``factory`` under ``name``; a name can be registered only once."""
        _check_name(name)
        with self._lock:
            if name in self._factories or self._entry_points_named(name):
                raise DuplicateCloudProvider(f"cloud provider {_q(name)} was registered twice")
            self._factories[name] = factory

    def known_names(self) -> list[str]:
        """Every registered name (in-process and installed entry points), sorted."""
        with self._lock:
            names = set(self._factories)
        names.update(ep.name for ep in self._source(self._group))
        return sorted(names)

    def is_cloud_provider(self, name: str) -> bool:
        """True when ``name`` is registered (upstream ``IsCloudProvider``)."""
        with self._lock:
            if name in self._factories:
                return True
        return bool(self._entry_points_named(name))

    def factory(self, name: str) -> Factory | None:
        """The factory for ``name``, loading only the matching entry point; ``None`` if unknown."""
        with self._lock:
            found = self._factories.get(name)
        if found is not None:
            return found
        if ":" in name:
            return _import_reference(name)
        return self._load_entry_point(name)

    def get_cloud_provider(self, name: str, config: TextIO | None) -> Interface | None:
        """Build provider ``name`` from ``config``; ``None`` for an unknown name (upstream)."""
        factory = self.factory(name)
        if factory is None:
            return None
        return factory(config)

    def init_cloud_provider(
        self, name: str, config_file: str | os.PathLike[str] | None
    ) -> Interface | None:
        """Select and build the provider as upstream ``InitCloudProvider`` does.

        ``""`` and ``"external"`` return ``None``. The config file, when a path is given, is
        opened and handed to the factory, then closed. An unknown name raises
        :class:`UnknownCloudProvider` listing the known names and the closest match.
        """
        if name == "":
            return None
        if is_external(name):
            log.info("External cloud provider specified")
            return None
        factory = self.factory(name)
        if factory is None:
            raise UnknownCloudProvider(self._unknown_message(name))
        cloud = _run_factory(name, factory, config_file)
        if cloud is None:
            raise UnknownCloudProvider(f"unknown cloud provider {_q(name)}")
        return cloud

    def _entry_points_named(self, name: str) -> list[EntryPoint]:
        return [ep for ep in self._source(self._group) if ep.name == name]

    def _load_entry_point(self, name: str) -> Factory | None:
        matches = self._entry_points_named(name)
        if not matches:
            return None
        if len({ep.value for ep in matches}) > 1:
            values = ", ".join(sorted({ep.value for ep in matches}))
            raise DuplicateCloudProvider(
                f"cloud provider {_q(name)} was registered twice (entry points {values})"
            )
        try:
            loaded: Factory = matches[0].load()
        except Exception as err:
            raise CloudProviderInitError(
                f"could not init cloud provider {_q(name)}: cannot load entry point "
                f"{matches[0].value}: {err}"
            ) from err
        return loaded

    def _unknown_message(self, name: str) -> str:
        known = self.known_names()
        message = f"unknown cloud provider {_q(name)}"
        message += f" (known providers: {', '.join(known)})" if known else " (none are installed)"
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            message += f"; did you mean {_q(close[0])}?"
        return message


def _check_name(name: str) -> None:
    if not name or ":" in name or is_external(name):
        raise ValueError(f"invalid cloud provider name {_q(name)}")


def _import_reference(reference: str) -> Factory:
    module_name, _, attribute = reference.partition(":")
    try:
        target: object = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError) as err:
        raise CloudProviderInitError(
            f"could not init cloud provider {_q(reference)}: {err}"
        ) from err
    if not callable(target):
        raise CloudProviderInitError(
            f"could not init cloud provider {_q(reference)}: {attribute} is not callable"
        )
    factory: Factory = target  # checked callable above
    return factory


def _run_factory(
    name: str, factory: Factory, config_file: str | os.PathLike[str] | None
) -> Interface | None:
    if not config_file:
        return _call_factory(name, factory, None)
    try:
        stream = open(config_file, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as err:
        raise CloudProviderInitError(
            f"couldn't open cloud provider configuration {os.fspath(config_file)}: {err}"
        ) from err
    with stream:
        return _call_factory(name, factory, stream)


def _call_factory(name: str, factory: Factory, config: TextIO | None) -> Interface | None:
    try:
        return factory(config)
    except Exception as err:
        raise CloudProviderInitError(f"could not init cloud provider {_q(name)}: {err}") from err


default_registry = CloudProviderRegistry()
"""The process-wide registry the daemon uses."""


def register_cloud_provider(name: str, factory: Factory) -> None:
    """Register a provider factory in the default registry."""
    default_registry.register(name, factory)


def is_cloud_provider(name: str) -> bool:
    """True when the default registry knows ``name``."""
    return default_registry.is_cloud_provider(name)


def known_cloud_providers() -> list[str]:
    """Every provider name the default registry knows."""
    return default_registry.known_names()


def get_cloud_provider(name: str, config: TextIO | None) -> Interface | None:
    """Build provider ``name`` from the default registry, ``None`` if unknown."""
    return default_registry.get_cloud_provider(name, config)


def init_cloud_provider(name: str, config_file: str | os.PathLike[str] | None) -> Interface | None:
    """Upstream ``InitCloudProvider`` on the default registry."""
    return default_registry.init_cloud_provider(name, config_file)
