"""``[Global] use-clouds``: credentials from a clouds.yaml, read with PyYAML.

Upstream: ``ReadConfig`` (openstack.go) sets ``OS_CLIENT_CONFIG_FILE`` to ``clouds-file`` and
calls ``client.ReadClouds`` (client.go), which takes gophercloud/utils'
``clientconfig.GetCloudFromYAML`` and fills every ``[Global]`` value that is *empty* from the
chosen cloud (the file's values win). The cloud is ``[Global] cloud``, else ``$OS_CLOUD``, else
the only one in the file. The file is ``$OS_CLIENT_CONFIG_FILE``, else ``clouds.yaml`` (or
``.yml``) in the working directory, ``~/.config/openstack`` or ``/etc/openstack``; a
``secure.yaml`` found the same way is merged over it, and a ``profile``/``cloud`` key pulls in
``clouds-public.yaml`` under it (``requests.go``). Secrets are never logged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kccm.cloudprovider import CloudConfigError
from kccm.providers.openstack.config_sections import GlobalOpts

__all__ = ["find_yaml", "load_cloud", "merge_clouds_yaml"]

_AUTH_KEYS = {
    "auth_url": "auth_url",
    "user_id": "user_id",
    "username": "username",
    "password": "password",
    "tenant_id": "project_id",
    "tenant_name": "project_name",
    "domain_id": "domain_id",
    "domain_name": "domain_name",
    "tenant_domain_id": "project_domain_id",
    "tenant_domain_name": "project_domain_name",
    "user_domain_id": "user_domain_id",
    "user_domain_name": "user_domain_name",
    "application_credential_id": "application_credential_id",
    "application_credential_name": "application_credential_name",
    "application_credential_secret": "application_credential_secret",
    "token": "token",
}
"""``ReadClouds``: ``[Global]`` field -> ``auth:`` key of the cloud."""
_CLOUD_KEYS = {
    "region": "region_name",
    "ca_file": "cacert",
    "cert_file": "cert",
    "key_file": "key",
}


def default_search_dirs() -> list[Path]:
    """``FindAndReadYAML``: the working directory, ``~/.config/openstack``, ``/etc/openstack``."""
    return [Path.cwd(), Path.home() / ".config" / "openstack", Path("/etc/openstack")]


def find_yaml(names: Sequence[str], dirs: Sequence[Path]) -> Path | None:
    for directory in dirs:
        for name in names:
            candidate = directory / name
            if candidate.is_file():
                return candidate
    return None


def _read(path: Path, key: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise CloudConfigError([f"[Global] use-clouds: cannot read {path}: {err}"]) from err
    clouds = data.get(key) if isinstance(data, dict) else None
    if not isinstance(clouds, dict):
        raise CloudConfigError([f"[Global] use-clouds: {path} has no {key!r} mapping"])
    return {str(name): cloud for name, cloud in clouds.items() if isinstance(cloud, dict)}


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``mergeClouds``: ``override``'s non-empty values win, nested mappings merge."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        elif value not in (None, "", {}, []):
            merged[key] = value
    return merged


def _clouds_file(environ: Mapping[str, str], dirs: Sequence[Path]) -> Path:
    configured = environ.get("OS_CLIENT_CONFIG_FILE", "")
    if configured and Path(configured).is_file():
        return Path(configured)
    found = find_yaml(("clouds.yaml", "clouds.yml"), dirs)
    if found is None:
        where = f"{configured} or " if configured else ""
        raise CloudConfigError(
            [
                f"[Global] use-clouds: no clouds.yaml found (looked for {where}clouds.yaml in "
                + ", ".join(str(d) for d in dirs)
                + ")"
            ]
        )
    return found


def _pick(clouds: Mapping[str, Any], name: str, path: Path) -> dict[str, Any] | None:
    if name:
        if name not in clouds:
            raise CloudConfigError([f"[Global] use-clouds: cloud {name} does not exist in {path}"])
        return dict(clouds[name])
    if len(clouds) == 1:
        return dict(next(iter(clouds.values())))
    return None


def load_cloud(
    name: str, environ: Mapping[str, str], dirs: Sequence[Path] | None = None
) -> dict[str, Any]:
    """The chosen cloud's entry (``GetCloudFromYAML``), secure.yaml and profile merged."""
    search = list(dirs) if dirs is not None else default_search_dirs()
    path = _clouds_file(environ, search)
    clouds = _read(path, "clouds")
    name = name or environ.get("OS_CLOUD", "")
    cloud = _pick(clouds, name, path)
    if cloud is not None:
        cloud = _with_profile(cloud, search)
    secure_path = find_yaml(("secure.yaml", "secure.yml"), search)
    if secure_path is not None:
        secure = _read(secure_path, "clouds")
        if cloud is None and not name and len(secure) == 1:
            cloud = dict(next(iter(secure.values())))
        elif name in secure:
            cloud = _merge(cloud or {}, secure[name])
    if cloud is None:
        which = name or "(none named, and the file has several)"
        raise CloudConfigError([f"[Global] use-clouds: could not find cloud {which} in {path}"])
    return cloud


def _with_profile(cloud: dict[str, Any], dirs: Sequence[Path]) -> dict[str, Any]:
    profile = str(cloud.get("profile") or cloud.get("cloud") or "")
    if not profile:
        return cloud
    public_path = find_yaml(("clouds-public.yaml", "clouds-public.yml"), dirs)
    public = _read(public_path, "public-clouds") if public_path is not None else {}
    if profile not in public:
        raise CloudConfigError(
            [f"[Global] use-clouds: cloud {profile} does not exist in clouds-public.yaml"]
        )
    return _merge(public[profile], cloud)


def merge_clouds_yaml(
    glob: GlobalOpts,
    environ: Mapping[str, str] | None = None,
    dirs: Sequence[Path] | None = None,
) -> GlobalOpts:
    """``[Global]`` with every empty value filled from the cloud (``ReadClouds``)."""
    env = dict(os.environ if environ is None else environ)
    if glob.clouds_file:
        env["OS_CLIENT_CONFIG_FILE"] = glob.clouds_file  # ReadConfig's os.Setenv
    cloud = load_cloud(glob.cloud, env, dirs)
    found = cloud.get("auth")
    auth: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    changes: dict[str, Any] = {}
    for field, key in _AUTH_KEYS.items():
        _fill(changes, glob, field, auth.get(key))
    for field, key in _CLOUD_KEYS.items():
        _fill(changes, glob, field, cloud.get(key))
    _fill(changes, glob, "os_endpoint_type", cloud.get("endpoint_type") or cloud.get("interface"))
    return dataclasses.replace(glob, **changes) if changes else glob


def _fill(changes: dict[str, Any], glob: GlobalOpts, field: str, value: object) -> None:
    if not getattr(glob, field) and value not in (None, ""):
        changes[field] = str(value)
