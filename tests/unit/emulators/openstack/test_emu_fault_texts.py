"""An injected 409 on a balancer's child names the balancer, as Octavia's ``ImmutableObject``
does ("Load Balancer <id> is immutable and cannot be updated."): listeners and pools are stored
with their balancer, members and monitors reach it through their pool."""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import LB, Api
from test_emu_octavia import create, full_spec


def _child_paths(lb: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    listener, pool = lb["listeners"][0], lb["pools"][0]
    member = pool["members"][0]
    return {
        "listener": (f"/listeners/{listener['id']}", {"listener": {"name": "x"}}),
        "pool": (f"/pools/{pool['id']}", {"pool": {"name": "x"}}),
        "member": (f"/pools/{pool['id']}/members/{member['id']}", {"member": {"weight": 2}}),
        "monitor": (
            f"/healthmonitors/{pool['healthmonitor']['id']}",
            {"healthmonitor": {"delay": 6}},
        ),
    }


@pytest.mark.parametrize("child", ["listener", "pool", "member", "monitor"])
async def test_an_injected_conflict_on_a_child_names_its_balancer(api: Api, child: str) -> None:
    lb = await create(api, full_spec(api, monitor=True))
    api.settle()
    path, body = _child_paths(lb)[child]
    await api.ok(
        "POST",
        "/_emu/faults",
        {"service": "load-balancer", "method": "PUT", "path_regex": path, "kind": "conflict"},
    )
    status, answer = await api.call("PUT", f"{LB}{path}", body)
    assert (status, answer["faultstring"]) == (
        409,
        f"Load Balancer {lb['id']} is immutable and cannot be updated.",
    )
