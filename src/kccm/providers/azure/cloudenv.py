"""Which Azure cloud: the ARM endpoint, the token audience and the sign-in authority.

Upstream: ``azclient.GetAzureCloudConfigAndEnvConfig`` (``pkg/azclient/cloud.go`` and
``pkg/azclient/utils/cloud.go``, v1.36.5), built on the Go SDK's ``cloud.AzurePublic``,
``AzureChina`` and ``AzureGovernment``:

- ``cloud`` names the cloud (case-insensitive): ``AzurePublicCloud``/``AzureCloud``,
  ``AzureChinaCloud``, ``AzureUSGovernment``/``AzureUSGovernmentCloud``; anything else,
  ``AzureStackCloud`` included, starts from the public cloud;
- ``resourceManagerEndpoint`` (when set): ``GET <endpoint>/metadata/endpoints?api-version=
  2019-05-01`` names the ARM endpoint, the audience and the sign-in endpoint of the entry named
  like ``cloud`` (or the first entry when ``cloud`` is empty);
- ``AzureStackCloud`` with ``AZURE_ENVIRONMENT_FILEPATH``: the JSON file's
  ``resourceManagerEndpoint`` (with ``tokenAudience``, which defaults to
  ``https://management.azure.com/``) and ``activeDirectoryEndpoint`` win. That is how kccm's
  Azure emulator is reached, exactly as upstream is pointed at it.

``disableAzureStackCloud`` only concerns the API versions (the public ones are sent when it is
true, see :mod:`kccm.providers.azure.versions`) and zones.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kccm.cloudprovider import CloudConfigError
from kccm.providers.azure.config_fields import AzureConfig

__all__ = [
    "AZURE_STACK_CLOUD",
    "ENVIRONMENT_FILEPATH",
    "CloudEnvironment",
    "cloud_environment",
    "is_stack_cloud",
]

ENVIRONMENT_FILEPATH = "AZURE_ENVIRONMENT_FILEPATH"
AZURE_STACK_CLOUD = "AZURESTACKCLOUD"
METADATA_API_VERSION = "2019-05-01"
STACK_DEFAULT_AUDIENCE = "https://management.azure.com/"
"""``PublicCloud.TokenAudience``: what the environment file's ``tokenAudience`` defaults to."""


@dataclass(frozen=True)
class CloudEnvironment:
    """One Azure cloud as the provider talks to it."""

    name: str
    resource_manager_endpoint: str
    audience: str
    authority_host: str

    @property
    def scope(self) -> str:
        """``DefaultTokenScopeFor``: the audience without its trailing ``/``, ``/.default``."""
        return f"{self.audience.rstrip('/')}/.default"

    @property
    def arm_url(self) -> str:
        return self.resource_manager_endpoint.rstrip("/")


PUBLIC = CloudEnvironment(
    "AzurePublicCloud",
    "https://management.azure.com",
    "https://management.core.windows.net/",
    "https://login.microsoftonline.com/",
)
CHINA = CloudEnvironment(
    "AzureChinaCloud",
    "https://management.chinacloudapi.cn",
    "https://management.core.chinacloudapi.cn",
    "https://login.chinacloudapi.cn/",
)
GOVERNMENT = CloudEnvironment(
    "AzureUSGovernmentCloud",
    "https://management.usgovcloudapi.net",
    "https://management.core.usgovcloudapi.net",
    "https://login.microsoftonline.us/",
)
_CLOUDS = {
    "AZURECHINACLOUD": CHINA,
    "AZURECLOUD": PUBLIC,
    "AZUREPUBLICCLOUD": PUBLIC,
    "AZUREUSGOVERNMENT": GOVERNMENT,
    "AZUREUSGOVERNMENTCLOUD": GOVERNMENT,
}


def is_stack_cloud(config: AzureConfig) -> bool:
    """``Config.IsStackCloud``: ``AzureStackCloud`` without ``disableAzureStackCloud``."""
    stack = config.cloud.strip().upper() == AZURE_STACK_CLOUD
    return stack and not config.disable_azure_stack_cloud


def _field(data: Mapping[str, Any], key: str) -> str:
    """A string field of a JSON object, matched as Go's ``encoding/json`` does."""
    for name, value in data.items():
        if name == key:
            return str(value or "")
    for name, value in data.items():
        if str(name).lower() == key.lower():
            return str(value or "")
    return ""


def _from_metadata(endpoint: str, cloud: str, env: CloudEnvironment) -> CloudEnvironment:
    url = f"{endpoint.rstrip('/')}/metadata/endpoints?api-version={METADATA_API_VERSION}"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            entries = json.loads(answer.read())
    except (OSError, ValueError) as err:
        raise CloudConfigError([f'"resourceManagerEndpoint": cannot read {url}: {err}']) from err
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping):
            continue
        if cloud and _field(entry, "name").lower() != cloud.lower():
            continue
        auth = entry.get("authentication") or {}
        audiences = auth.get("audiences") or [env.audience]
        login = _field(auth, "loginEndpoint")
        return replace(
            env,
            resource_manager_endpoint=_field(entry, "resourceManager") or endpoint,
            audience=str(audiences[0]),
            authority_host=login or env.authority_host,
        )
    return env


def _from_environment_file(path: str, env: CloudEnvironment) -> CloudEnvironment:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise CloudConfigError([f"{ENVIRONMENT_FILEPATH}: cannot read {path}: {err}"]) from err
    if not isinstance(data, Mapping):
        raise CloudConfigError([f"{ENVIRONMENT_FILEPATH}: {path} is not a JSON object"])
    endpoint = _field(data, "resourceManagerEndpoint")
    audience = _field(data, "tokenAudience") or STACK_DEFAULT_AUDIENCE
    directory = _field(data, "activeDirectoryEndpoint")
    if endpoint:
        env = replace(env, resource_manager_endpoint=endpoint, audience=audience)
    if directory:
        env = replace(env, authority_host=directory)
    return replace(env, name=_field(data, "name") or "AzureStackCloud")


def cloud_environment(
    config: AzureConfig, environ: Mapping[str, str] | None = None
) -> CloudEnvironment:
    """The cloud ``config`` names (see the module doc)."""
    env_vars = os.environ if environ is None else environ
    name = config.cloud.strip().upper()
    env = _CLOUDS.get(name, PUBLIC)
    if config.resource_manager_endpoint:
        env = _from_metadata(config.resource_manager_endpoint, config.cloud, env)
    path = env_vars.get(ENVIRONMENT_FILEPATH)
    if name == AZURE_STACK_CLOUD and path is not None:
        env = _from_environment_file(path, env)
    return env
