"""The files a user's cloud-provider-azure reads, written for a running emulator, so the
provider's tests and upstream's binaries share one seed:

- ``azure.json`` as upstream v1.36.5 reads it (``pkg/provider/config/azure.go``,
  ``pkg/azclient/{arm_conf,auth_conf}.go``): ``"cloud": "AzureStackCloud"``, ``"tenantId":
  "adfs"``, the client's id and secret, the subscription, resource group, location, network
  names, ``"vmType"``, ``"loadBalancerSku"``, and ``"disableAzureStackCloud": true`` so the
  clients send the public API versions;
- the environment file ``AZURE_ENVIRONMENT_FILEPATH`` names (``pkg/azclient/cloud.go``:
  ``resourceManagerEndpoint``, ``activeDirectoryEndpoint``, ``tokenAudience``), both
  endpoints being the emulator's ARM port, whose ``/adfs`` is the sign-in authority;
- the environment to run with: that path, and ``SSL_CERT_FILE`` (Go) and
  ``REQUESTS_CA_BUNDLE`` (Python) naming the emulator's CA when it serves HTTPS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CloudFiles", "azure_json", "environment_document", "write_cloud_files"]


@dataclass(frozen=True)
class CloudFiles:
    azure_json: Path
    environment_file: Path
    env: dict[str, str] = field(default_factory=dict)  # to run a client with


def environment_document(base_url: str) -> dict[str, str]:
    return {
        "name": "AzureStackCloud",
        "managementPortalURL": base_url + "/",
        "serviceManagementEndpoint": base_url + "/",
        "resourceManagerEndpoint": base_url + "/",
        "activeDirectoryEndpoint": base_url + "/",
        "tokenAudience": base_url,
        "storageEndpointSuffix": "local.azurestack.external",
        "resourceManagerVMDNSSuffix": "cloudapp.azurestack.external",
    }


def azure_json(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """Upstream's ``azure.json`` for the emulator's default world (``config`` is its
    ``/_emu/config``); ``overrides`` win (a value of None drops the key)."""
    found: dict[str, Any] = {
        "cloud": "AzureStackCloud",
        "disableAzureStackCloud": True,
        "tenantId": config["tenant"],
        "subscriptionId": config["subscription"],
        "aadClientId": config["client_id"],
        "aadClientSecret": config["client_secret"],
        "resourceGroup": config["resource_group"],
        "location": config["location"],
        "vmType": "standard",
        "vnetName": config["vnet"],
        "vnetResourceGroup": config["resource_group"],
        "subnetName": config["subnet"],
        "securityGroupName": config["nsg"],
        "securityGroupResourceGroup": config["resource_group"],
        "routeTableName": config["route_table"],
        "routeTableResourceGroup": config["resource_group"],
        "loadBalancerSku": "standard",
        "useInstanceMetadata": False,
    }
    found.update(overrides)
    return {k: v for k, v in found.items() if v is not None}


def write_cloud_files(
    directory: Path, config: Mapping[str, Any], ca_file: str = "", **overrides: Any
) -> CloudFiles:
    directory.mkdir(parents=True, exist_ok=True)
    environment_file = directory / "azurestackcloud.json"
    environment_file.write_text(json.dumps(environment_document(str(config["base_url"])), indent=2))
    conf = directory / "azure.json"
    conf.write_text(json.dumps(azure_json(config, **overrides), indent=2))
    env = {"AZURE_ENVIRONMENT_FILEPATH": str(environment_file)}
    if ca_file:
        env.update(SSL_CERT_FILE=ca_file, REQUESTS_CA_BUNDLE=ca_file)
    return CloudFiles(azure_json=conf, environment_file=environment_file, env=env)
