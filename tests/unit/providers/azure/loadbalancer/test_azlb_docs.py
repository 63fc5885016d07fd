"""docs/providers/azure-loadbalancer.md's annotation table equals the code: every annotation
the balancer reads is there as supported, every one it refuses as refused, nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from kccm.providers.azure.loadbalancer import annotations

DOC = Path(__file__).resolve().parents[5] / "docs" / "providers" / "azure-loadbalancer.md"
ROW = re.compile(r"^\| `(service\.beta\.kubernetes\.io/[^`]+)` \| (supported|refused) \|", re.M)


def _table() -> dict[str, str]:
    return dict(ROW.findall(DOC.read_text()))


def _code() -> dict[str, str]:
    read = {
        getattr(annotations, name): "supported"
        for name in annotations.__all__
        if name.isupper() and isinstance(getattr(annotations, name), str)
    }
    return read | dict.fromkeys(annotations.REFUSED, "refused")


def test_table_equals_the_code() -> None:
    assert _table() == _code()


def test_upstreams_annotations_are_all_covered() -> None:
    """The azure-* keys upstream v1.36.5 declares (pkg/consts/consts.go), each one here."""
    upstream = {
        "azure-additional-public-ips",
        "azure-allowed-ip-ranges",
        "azure-allowed-service-tags",
        "azure-deny-all-except-load-balancer-source-ranges",
        "azure-disable-load-balancer-floating-ip",
        "azure-disable-load-balancer-nsg-rule",
        "azure-dns-label-name",
        "azure-load-balancer-configurations",
        "azure-load-balancer-disable-tcp-reset",
        "azure-load-balancer-enable-high-availability-ports",
        "azure-load-balancer-health-probe-interval",
        "azure-load-balancer-health-probe-num-of-probe",
        "azure-load-balancer-health-probe-protocol",
        "azure-load-balancer-health-probe-request-path",
        "azure-load-balancer-internal",
        "azure-load-balancer-internal-subnet",
        "azure-load-balancer-ipv4",
        "azure-load-balancer-ipv6",
        "azure-load-balancer-mode",
        "azure-load-balancer-resource-group",
        "azure-load-balancer-tcp-idle-timeout",
        "azure-pip-ip-tags",
        "azure-pip-name",
        "azure-pip-name-ipv6",
        "azure-pip-prefix-id",
        "azure-pip-prefix-id-ipv6",
        "azure-pip-tags",
        "azure-pls-auto-approval",
        "azure-pls-create",
        "azure-pls-fqdns",
        "azure-pls-ip-configuration-ip-address",
        "azure-pls-ip-configuration-ip-address-count",
        "azure-pls-ip-configuration-subnet",
        "azure-pls-name",
        "azure-pls-proxy-protocol",
        "azure-pls-resource-group",
        "azure-pls-visibility",
    }
    covered = {key.removeprefix("service.beta.kubernetes.io/") for key in _code()}
    assert upstream - covered == set()
