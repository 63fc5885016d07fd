"""The security group edited behind the controllers' backs, for the retain-pass tests: an ARM
client of the test's own on the emulator, and a user's rule (not ``k8s-azure-lb...``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from azure.identity import ClientSecretCredential

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.loadbalancer.armclient import ClientArm
from kccm.providers.azure.versions import API_VERSIONS

__all__ = ["USER_RULE", "drop_user_rule", "emulator_arm", "user_rule"]

USER_RULE = "user-allow-ssh"


def emulator_arm(emulator: AzureEmulator, directory: Path) -> ClientArm:
    """GET and PUT (``If-Match``) on the emulator, signed in as the cloud config says."""
    files = emulator.cloud_files(directory)
    text = json.dumps(json.loads(Path(files.azure_json).read_text()))
    config = load_azure_config(text, "azure.json", environ=files.env)
    conf = emulator.config
    credential = ClientSecretCredential(
        conf["tenant"],
        conf["client_id"],
        conf["client_secret"],
        authority=emulator.url,
        disable_instance_discovery=True,
        connection_verify=emulator.ca_file,
    )
    client = ARMClient(
        emulator.url,
        credential,
        f"{emulator.url}/.default",
        subscription_id=config.subscription_id,
        verify=emulator.ca_file,
        poll_interval=0.05,
    )
    return ClientArm(client, API_VERSIONS)


def user_rule(destination: str) -> dict[str, Any]:
    """The user's own allow rule (priority 300, outside the managed 500-4096)."""
    props = {
        "priority": 300,
        "protocol": "Tcp",
        "access": "Allow",
        "direction": "Inbound",
        "sourceAddressPrefix": "*",
        "sourcePortRange": "*",
        "destinationAddressPrefix": destination,
        "destinationPortRange": "22",
    }
    return {"name": USER_RULE, "properties": props}


def drop_user_rule(arm: ClientArm, path: str) -> None:
    group = arm.get(path)
    if group is None:
        return
    rules = group["properties"].get("securityRules") or []
    kept = [r for r in rules if r["name"] != USER_RULE]
    if len(kept) != len(rules):
        group["properties"]["securityRules"] = kept
        arm.put(path, group, if_match=group.get("etag"))
