"""Support for the openstack load-balancer tests (``test_lb_*.py``): one emulator per
process (per xdist worker), a world of servers per test that must be left as found, Nodes and
Services as the framework hands them over, a step clock and a recording Service patcher."""

from __future__ import annotations

import atexit
import contextlib
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.emulators.openstack.launcher import Emulator, start_emulator
from kccm.providers.openstack.api import OpenStackAPI
from kccm.providers.openstack.config import load_openstack_config
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer.names import load_balancer_name
from kccm.providers.openstack.loadbalancer.sharing import OctaviaSharing

CLUSTER = "kubernetes"
SCALE = 0.02
"""Real seconds per second of backoff the step clock sleeps (the emulator turns balancers
ACTIVE after a real 50 ms)."""

_EMULATOR: list[Emulator] = []


def shared_emulator() -> Emulator:
    """The process's emulator, started on first use and stopped at exit."""
    if not _EMULATOR:
        emulator = start_emulator(lb_active_delay=0.05)
        atexit.register(emulator.stop)
        _EMULATOR.append(emulator)
    return _EMULATOR[0]


class StepClock:
    """A kccm Clock whose blocking sleeps are recorded and taken at :data:`SCALE`."""

    def __init__(self) -> None:
        self.now_s = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now_s

    def now(self) -> Any:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def sleep_blocking(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now_s += seconds
        time.sleep(seconds * SCALE)


@dataclass
class RecordingPatcher:
    """A ServicePatcher that keeps what it was asked to write."""

    patches: list[dict[str, str]] = field(default_factory=list)

    def patch_annotations(self, service: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
        self.patches.append(dict(annotations))


def node_of(
    server: Mapping[str, Any], labels: Mapping[str, str] | None = None, ipv6: bool = False
) -> dict[str, Any]:
    """The Node kubelet + kccm make of an emulator server: its fixed IPv4 (and, with
    ``ipv6``, its IPv6) addresses as InternalIPs."""
    versions = (4, 6) if ipv6 else (4,)
    fixed = [
        a["addr"]
        for addresses in (server.get("addresses") or {}).values()
        for a in addresses
        if a.get("version") in versions and a.get("OS-EXT-IPS:type", "fixed") == "fixed"
    ]
    return {
        "metadata": {"name": server["name"], "labels": dict(labels or {})},
        "spec": {"providerID": f"openstack:///{server['id']}"},
        "status": {"addresses": [{"type": "InternalIP", "address": a} for a in fixed]},
    }


def service(
    name: str = "web",
    ports: Sequence[tuple[int, int]] = ((80, 30080),),
    protocol: str = "TCP",
    annotations: Mapping[str, str] | None = None,
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    """A LoadBalancer Service; ``ports`` are (port, nodePort) pairs."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{port}", "port": port, "nodePort": node_port, "protocol": protocol}
                for port, node_port in ports
            ],
            **spec,
        },
    }


def annotated(svc: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy with annotations added (a value of None removes one) and spec fields set."""
    meta = dict(svc["metadata"])
    values = dict(meta.get("annotations") or {})
    for key, value in changes.pop("annotations", {}).items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    meta["annotations"] = values
    return {**svc, "metadata": meta, "spec": {**svc["spec"], **changes}}


@dataclass
class LBWorld:
    """The emulator, the test's servers as Nodes, and balancers on demand."""

    emu: Emulator
    servers: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    clock: StepClock = field(default_factory=StepClock)
    patcher: RecordingPatcher = field(default_factory=RecordingPatcher)
    made: list[OctaviaSharing] = field(default_factory=list)

    @property
    def ids(self) -> dict[str, Any]:
        return self.emu.config

    def balancers(
        self, sections: Mapping[str, Mapping[str, str | None]] | None = None, **lb: str | None
    ) -> OctaviaSharing:
        """The provider's LoadBalancer on a cloud.conf with these ``[LoadBalancer]`` keys."""
        overrides = {k: dict(v) for k, v in (sections or {}).items()}
        overrides.setdefault("LoadBalancer", {}).update(lb)
        config = load_openstack_config(self.emu.cloud_conf(overrides))
        made = OctaviaSharing(OpenStackAPI(config), config, self.clock, self.patcher)
        self.made.append(made)
        return made

    def seq(self) -> int:
        return self.emu.admin.last_seq()

    def writes(self, since: int) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.emu.admin.mutating(since)]

    def lb_named(self, svc: Mapping[str, Any]) -> dict[str, Any]:
        name = load_balancer_name(CLUSTER, svc)
        api = self.made[0].octavia
        found = api.list_load_balancers(name=name)
        assert len(found) == 1, found
        return found[0]

    def with_written(self, svc: Mapping[str, Any]) -> dict[str, Any]:
        """The Service as the patcher's annotations left it (what the next sync sees)."""
        values: dict[str, str] = {}
        for patch in self.patcher.patches:
            values.update(patch)
        return annotated(svc, annotations=values)

    def cleanup(self, baseline: Mapping[str, list[Any]]) -> None:
        """What a failed test left (pytest does not tell a fixture that its test failed):
        balancers and floating IPs the baseline did not have."""
        if not self.made:
            return
        octavia, neutron = self.made[0].octavia, self.made[0].neutron
        for lb in octavia.list_load_balancers():
            if lb["id"] in baseline.get("loadbalancers", ()):
                continue
            with contextlib.suppress(Exception):
                octavia.wait_active(str(lb["id"]))
            with contextlib.suppress(Exception):
                octavia.delete_load_balancer(str(lb["id"]), cascade=True)
        leftover = set(self.emu.admin.state().get("floatingips", ())) - set(
            baseline.get("floatingips", ())
        )
        for fip_id in leftover:
            with contextlib.suppress(Exception):
                neutron.delete_floating_ip(fip_id)


@contextlib.contextmanager
def lb_world(servers: int = 2) -> Iterator[LBWorld]:
    """Servers for the test; afterwards they go, faults are cleared, and the emulator must
    hold exactly what it held before (an AssertionError names the rest)."""
    emu = shared_emulator()
    baseline = emu.admin.state()
    tag = uuid.uuid4().hex[:6]
    made = [emu.admin.add_server(f"node-{tag}-{i}") for i in range(servers)]
    world = LBWorld(emu, made, [node_of(s) for s in made])
    try:
        yield world
    finally:
        emu.admin.clear_faults()
        left = _leaked(emu.admin.state(), baseline)
        world.cleanup(baseline)
        for server in made:
            emu.admin.delete_server(server["id"])
        emu.admin.assert_clean(baseline)
    assert not left, f"the test left in the OpenStack emulator: {left}"


def _leaked(state: Mapping[str, list[Any]], baseline: Mapping[str, list[Any]]) -> dict[str, Any]:
    """What the test made and did not delete (its servers aside: the fixture deletes them)."""
    found = {
        k: sorted(set(v) - set(baseline.get(k, ()))) for k, v in state.items() if k != "servers"
    }
    return {k: v for k, v in found.items() if v}


__all__ = [
    "CLUSTER",
    "LBWorld",
    "RecordingPatcher",
    "StepClock",
    "ann",
    "annotated",
    "lb_world",
    "node_of",
    "service",
    "shared_emulator",
]
