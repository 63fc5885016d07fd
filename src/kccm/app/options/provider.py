"""--cloud-provider and --cloud-config checked before anything runs."""

from __future__ import annotations

import dataclasses
import difflib

from kccm.app.flags import go_quote
from kccm.cloudprovider.config import load_cloud_config
from kccm.cloudprovider.errors import CloudConfigError, CloudProviderInitError
from kccm.cloudprovider.registry import CloudProviderRegistry, is_external

# -- provider and cloud config -------------------------------------------------------------------


def provider_errors(name: str, cloud_config: str, registry: CloudProviderRegistry) -> list[str]:
    """The provider must exist; the cloud config must be readable and, when the factory
    declares ``config_schema`` (a cloud-config dataclass), valid against it. A factory whose
    ``config_ignores_unknown_keys`` is true accepts unknown sections and keys (upstream gcfg
    read with ``gcfg.FatalOnly``, as OCCM reads its ``cloud.conf``)."""
    if is_external(name):
        return [
            '--cloud-provider: "external" selects no provider; kccm needs the name of the '
            "provider to run"
        ]
    try:
        factory = registry.factory(name)
    except CloudProviderInitError as err:
        return [f"--cloud-provider: {err}"]
    errors = [] if factory is not None else [_unknown_provider(name, registry)]
    text, read_errors = _read_cloud_config(cloud_config)
    errors += read_errors
    schema = getattr(factory, "config_schema", None)
    if text is not None and dataclasses.is_dataclass(schema) and isinstance(schema, type):
        try:
            allow_unknown = bool(getattr(factory, "config_ignores_unknown_keys", False))
            load_cloud_config(text, schema, source=cloud_config, allow_unknown=allow_unknown)
        except CloudConfigError as err:
            errors += [f"--cloud-config: {issue}" for issue in err.issues]
    return errors


def _unknown_provider(name: str, registry: CloudProviderRegistry) -> str:
    known = registry.known_names()
    message = f"--cloud-provider: unknown cloud provider {go_quote(name)}"
    message += f" (known providers: {', '.join(known)})" if known else " (none are installed)"
    close = difflib.get_close_matches(name, known, n=1)
    return message + (f"; did you mean {go_quote(close[0])}?" if close else "")


def _read_cloud_config(path: str) -> tuple[str | None, list[str]]:
    if not path:
        return None, []
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read(), []
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        return None, [
            f"--cloud-config: couldn't open cloud provider configuration {path}: {reason}"
        ]
