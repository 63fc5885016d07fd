"""Draining a leaving Node through the real daemon with ``--cloud-provider=aws`` (real
apiserver, moto behind the fault proxy, issue 39): a Node labelled out of an NLB's node set
stays registered for the Service's ``service.kccm.io/drain-seconds``; ``DeregisterTargets``
comes after that time, never before (the proxy's ledger times every request)."""

from __future__ import annotations

import time

from test_aws_daemon import (  # the daemon module's environment (fixtures included)
    Env,
    _all_initialised,
    _lbs_where,
    delete_services,
    env,
    eventually,
    kubelet_node,
    lb_service,
    moto_url,
)

from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

DRAIN_SECONDS = 6
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


async def _targets_are(env: Env, wanted: set[str]) -> bool:
    found = await _lbs_where(
        env, lambda lbs: len(lbs) == 1 and next(iter(lbs.values()))["targets"] == wanted
    )
    return found is not None


async def test_a_labelled_node_is_deregistered_after_the_drain_time_not_before(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    env.start()
    instances = list(env.world.instances)[:3]
    names = {i: kube_cleanup.add(NODES, env.world.instances[i]) for i in instances}
    for n, name in enumerate(names.values()):
        await kube.create(NODES, kubelet_node(name, f"10.244.{n}.0/24"))
    await eventually(lambda: _all_initialised(kube, list(names.values())))
    svc = lb_service("drained")
    svc["metadata"]["annotations"][ANNOTATION_DRAIN_SECONDS] = str(DRAIN_SECONDS)
    await kube.create(SERVICES, svc, namespace=ns)
    await eventually(lambda: _targets_are(env, set(instances)))

    leaving, *staying = instances
    env.proxy.ledger = []
    labelled = time.time()
    await kube.patch(NODES, names[leaving], {"metadata": {"labels": {EXCLUDE: "true"}}})
    await eventually(lambda: _targets_are(env, set(staying)))
    deregistered = [
        c.arrived
        for c in list(env.proxy.ledger)
        if c.action == "DeregisterTargets" and c.status == 200
    ]
    assert deregistered, "the Node left the targets without a DeregisterTargets"
    first = min(deregistered)
    assert first - labelled >= DRAIN_SECONDS, "deregistered before the drain time"
    print(
        f"\naws drain figures: label->DeregisterTargets {first - labelled:.2f}s "
        f"(drain-seconds {DRAIN_SECONDS}), {len(deregistered)} DeregisterTargets answered 200"
    )
    await delete_services(kube, ns, ["drained"])
