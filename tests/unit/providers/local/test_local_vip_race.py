"""Two Services ensured at once by the local provider: the VIP pool they share.

An ensure reads the Service's row and claims, compares, and only then writes; the claim of a
free (or the requested) VIP and the row are one ``BEGIN IMMEDIATE`` transaction, so a decision
made on a stale read cannot hand one address to two Services. The interleavings are forced
(``kccm.testing.interleave``): each ensure stops before its write until the other has read,
with the two syncs in one daemon (one store shared by its threads) or in two processes' worth
of connections to the same state file.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import InvalidServiceConfig
from kccm.providers.local import LocalCloud
from kccm.providers.local.balancers import LocalLoadBalancers
from kccm.providers.local.config import load_local_config
from kccm.providers.local.desired import LocalPoolExhausted
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing.interleave import Interleaving, Stop

CLUSTER = "kubernetes"
ROLES = ("a", "b")
NODES = [
    {
        "metadata": {"name": "n1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.10.1"}]},
    }
]


def service(role: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": role, "namespace": "ns", "uid": f"uid-{role}", "annotations": {}},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
            **spec,
        },
    }


@contextmanager
def clouds(tmp_path: Path, vip_range: str, separate: bool) -> Iterator[dict[str, LocalCloud]]:
    """A LocalCloud per role: the same one (one daemon's threads) or one each on the same
    state file (``separate``)."""
    text = f"[Global]\nvip-range = {vip_range}\n"
    stores = [LocalStore(tmp_path / "state.db") for _ in (ROLES if separate else ROLES[:1])]
    try:
        stores[0].add_instance(InstanceRecord("n1", (("InternalIP", "127.0.10.1"),)))
        made = [LocalCloud(s, load_local_config(io.StringIO(text))) for s in stores]
        yield {role: made[i % len(made)] for i, role in enumerate(ROLES)}
    finally:
        for store in stores:
            store.close()


@contextmanager
def watch(order: Interleaving, balancers: LocalLoadBalancers) -> Iterator[None]:
    """``read`` after the ensure's read of its row and claims, ``write`` before its write."""
    store = balancers.store
    describe, ensure = store.describe_load_balancer, store.ensure_load_balancer

    def watched_describe(*args: Any, **kw: Any) -> Any:
        found = describe(*args, **kw)
        order.mark("read")
        return found

    def watched_ensure(*args: Any, **kw: Any) -> Any:
        order.before("write")
        return ensure(*args, **kw)

    store.describe_load_balancer = watched_describe  # type: ignore[method-assign]
    store.ensure_load_balancer = watched_ensure  # type: ignore[method-assign]
    try:
        yield
    finally:
        store.describe_load_balancer = describe  # type: ignore[method-assign]
        store.ensure_load_balancer = ensure  # type: ignore[method-assign]


def _lb(cloud: LocalCloud) -> LocalLoadBalancers:
    made = cloud.load_balancer()
    assert isinstance(made, LocalLoadBalancers)
    return made


RACES = [
    # id, VIP range (two addresses go to warm-up Services first), the Services' spec, how
    # many get a VIP, the refusal of the other
    pytest.param("127.0.20.1-127.0.20.4", {}, 2, None, id="two-free-vips-two-addresses"),
    pytest.param(
        "127.0.20.1-127.0.20.3", {}, 1, LocalPoolExhausted, id="last-free-vip-goes-to-one"
    ),
    pytest.param(
        "127.0.20.0/29",
        {"loadBalancerIP": "127.0.20.3"},
        1,
        InvalidServiceConfig,
        id="same-requested-vip-goes-to-one",
    ),
]


@pytest.mark.parametrize("separate", [False, True], ids=["one-daemon", "two-processes"])
@pytest.mark.parametrize(("vip_range", "spec", "served", "refusal"), RACES)
def test_two_services_ensured_at_once_never_share_a_vip(
    tmp_path: Path,
    separate: bool,
    vip_range: str,
    spec: dict[str, Any],
    served: int,
    refusal: type[Exception] | None,
) -> None:
    order = Interleaving(
        Stop(role, "write", (f"{other}:read",))
        for role, other in zip(ROLES, reversed(ROLES), strict=True)
    )
    with clouds(tmp_path, vip_range, separate) as by_role:
        for role in ROLES:  # each connection has seen the claims (its cache of them is warm)
            _lb(by_role[role]).ensure_load_balancer(CLUSTER, service(f"warm-{role}"), NODES)
        services = {role: service(role, **spec) for role in ROLES}
        with ExitStack() as watching:
            for cloud in {id(c): c for c in by_role.values()}.values():
                watching.enter_context(watch(order, _lb(cloud)))
            results = order.run(
                {
                    role: (
                        lambda r=role: _lb(by_role[r]).ensure_load_balancer(
                            CLUSTER, services[r], NODES
                        )
                    )
                    for role in ROLES
                }
            )
        refused = [r for r in results.values() if isinstance(r, Exception)]
        assert len(results) - len(refused) == served, results
        assert all(refusal is not None and isinstance(r, refusal) for r in refused), refused
        rows = by_role["a"].store.list_load_balancers()
        assert len(rows) == served + len(ROLES)
        assert len({row.vip for row in rows}) == len(rows)
