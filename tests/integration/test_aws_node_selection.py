"""Target Nodes per Service (``service.kccm.io/target-node-selector``) through the real daemon
with ``--cloud-provider=aws`` (real apiserver, moto behind the fault proxy): three Nodes, a
selector picking two as the NLB's targets, a relabel converging, and aws' own
``target-node-labels`` on top giving the intersection."""

from __future__ import annotations

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

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR as SELECTOR
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

POOL = "kccm-test/pool"
TARGET_NODE_LABELS = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"


async def _targets_are(env: Env, wanted: set[str]) -> bool:
    found = await _lbs_where(
        env, lambda lbs: len(lbs) == 1 and next(iter(lbs.values()))["targets"] == wanted
    )
    return found is not None


async def test_a_selector_picks_two_of_three_nodes_and_a_relabel_converges(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    env.start()
    instances = list(env.world.instances)[:3]
    names = {i: kube_cleanup.add(NODES, env.world.instances[i]) for i in instances}
    for n, name in enumerate(names.values()):
        await kube.create(NODES, kubelet_node(name, f"10.244.{n}.0/24"))
    await eventually(lambda: _all_initialised(kube, list(names.values())))
    first, second, third = instances
    for instance, pool in ((first, "web"), (second, "web"), (third, "db")):
        await kube.patch(NODES, names[instance], {"metadata": {"labels": {POOL: pool}}})

    svc = lb_service("picky")
    svc["metadata"]["annotations"][SELECTOR] = f"{POOL} in (web)"
    await kube.create(SERVICES, svc, namespace=ns)
    await eventually(lambda: _targets_are(env, {first, second}))

    # -- relabels converge: the third joins, the first leaves ------------------------------
    await kube.patch(NODES, names[third], {"metadata": {"labels": {POOL: "web"}}})
    await eventually(lambda: _targets_are(env, {first, second, third}))
    await kube.patch(NODES, names[first], {"metadata": {"labels": {POOL: "db"}}})
    await eventually(lambda: _targets_are(env, {second, third}))

    # -- aws' own target-node-labels as well: both apply (the intersection) ---------------
    await kube.patch(NODES, names[third], {"metadata": {"labels": {"kccm-test/tier": "a"}}})
    await kube.patch(NODES, names[first], {"metadata": {"labels": {"kccm-test/tier": "a"}}})
    both = {"metadata": {"annotations": {TARGET_NODE_LABELS: "kccm-test/tier=a"}}}
    await kube.patch(SERVICES, "picky", both, namespace=ns)
    await eventually(lambda: _targets_are(env, {third}))

    # -- the framework's annotation removed: aws' alone --------------------------------------
    await kube.patch(
        SERVICES, "picky", {"metadata": {"annotations": {SELECTOR: None}}}, namespace=ns
    )
    await eventually(lambda: _targets_are(env, {first, third}))
    await delete_services(kube, ns, ["picky"])
