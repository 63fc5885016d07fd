"""The azure balancer on kccm's ARM emulator, for the emulator test modules: signed in through
its ADFS endpoint, configured from the azure.json the emulator writes (with overrides), and
small helpers for Services, Nodes and the request log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from azure.identity import ClientSecretCredential

from kccm.emulators.azure import AzureEmulator
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.providers.azure.loadbalancer.armclient import ClientArm, lb_settings
from kccm.providers.azure.versions import API_VERSIONS

__all__ = ["balancers", "network_id", "node", "resource", "service", "writes"]

CLUSTER = "kubernetes"


def balancers(emu: AzureEmulator, directory: Path, **overrides: Any) -> AzureLoadBalancers:
    """``AzureLoadBalancers`` over the emulator; ``overrides``: azure.json keys."""
    files = emu.cloud_files(directory)
    raw = json.loads(Path(files.azure_json).read_text())
    text = json.dumps({**raw, **overrides})
    config = load_azure_config(text, "azure.json", environ=files.env)
    conf = emu.config
    credential = ClientSecretCredential(
        conf["tenant"],
        conf["client_id"],
        conf["client_secret"],
        authority=emu.url,
        disable_instance_discovery=True,
        connection_verify=emu.ca_file,
    )
    client = ARMClient(
        emu.url,
        credential,
        f"{emu.url}/.default",
        subscription_id=config.subscription_id,
        verify=emu.ca_file,
        poll_interval=0.05,
    )
    return AzureLoadBalancers(ClientArm(client, API_VERSIONS), lb_settings(config))


def node(vm: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": vm["name"], "labels": {}},
        "spec": {"providerID": f"azure://{vm['id']}"},
        "status": {"addresses": []},
    }


def service(name: str, uid: str, port: int = 80, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", {})
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"protocol": "TCP", "port": port, "nodePort": 30000 + port}],
            **extra,
        },
    }


def writes(emu: AzureEmulator, since: int) -> list[str]:
    """The mutating ARM calls since the request log's sequence number ``since``."""
    return [f"{r['method']} {r['path']}" for r in emu.admin.mutating(since)]


def network_id(emu: AzureEmulator, kind: str, name: str) -> str:
    conf = emu.config
    return (
        f"/subscriptions/{conf['subscription']}/resourceGroups/{conf['resource_group']}"
        f"/providers/Microsoft.Network/{kind}/{name}"
    )


def resource(emu: AzureEmulator, kind: str, name: str) -> dict[str, Any]:
    return emu.admin.resource(network_id(emu, kind, name))
