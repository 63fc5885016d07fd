"""``kccm explain openstack-annotations [NAMESPACE]``: before switching from OCCM, list every
balancer annotation of the cluster's LoadBalancer Services that kccm reads differently from
OCCM v1.36.0 (or that neither reads).

It needs no running kccm and no cloud: it lists the Services with the user's kubeconfig
credentials (``list services``, in NAMESPACE or in every namespace) and applies the
openstack provider's rules (:mod:`kccm.providers.openstack.loadbalancer.preflight`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from kccm.kube.client import KubeApiClient
from kccm.kube.config import ClusterConfig
from kccm.kube.errors import KubeError
from kccm.kube.resources import SERVICES

__all__ = ["PREFLIGHT_KIND", "PreflightError", "ask_preflight", "render_preflight"]

PREFLIGHT_KIND = "openstack-annotations"


class PreflightError(Exception):
    """The Services could not be listed (exit 1)."""


async def ask_preflight(config: ClusterConfig, namespace: str) -> dict[str, Any]:
    """The findings as JSON: ``services_checked``, ``findings`` (each with ``differs``)."""
    from kccm.providers.openstack.loadbalancer.preflight import checked_services, findings

    kube = KubeApiClient(config, user_agent="kccm-explain")
    where = f"namespace {namespace}" if namespace else "any namespace"
    try:
        listed = (await kube.list(SERVICES, namespace=namespace or None)).items
    except KubeError as exc:
        raise PreflightError(f"cannot list Services in {where}: {exc}") from exc
    finally:
        await kube.close()
    services = checked_services(listed)
    found = [asdict(f) for svc in services for f in findings(svc)]
    return {"kind": PREFLIGHT_KIND, "services_checked": len(services), "findings": found}


def _block(finding: Mapping[str, Any]) -> list[str]:
    return [
        f"{finding['service']}  {finding['annotation']}={finding['value']}",
        f"  OCCM v1.36.0: {finding['occm']}",
        f"  kccm:         {finding['kccm']}",
    ]


def _section(title: str, found: Sequence[Mapping[str, Any]]) -> list[str]:
    if not found:
        return []
    lines = ["", title]
    for finding in found:
        lines += _block(finding)
    return lines


def render_preflight(answer: Mapping[str, Any]) -> str:
    """The findings for people: a summary line, then what differs, then what both ignore."""
    found: Sequence[Mapping[str, Any]] = answer.get("findings") or ()
    differs = [f for f in found if f["differs"]]
    same = [f for f in found if not f["differs"]]
    lines = [
        f"{answer.get('services_checked', 0)} LoadBalancer Services checked against OCCM "
        f"v1.36.0: {len(differs)} annotation(s) read differently, {len(same)} value(s) read "
        "the same way that OCCM did not use either"
    ]
    lines += _section("Read differently:", differs)
    lines += _section("Not used by OCCM either:", same)
    return "\n".join(lines)
