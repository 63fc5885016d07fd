"""The annotation table in docs/providers/alibabacloud-loadbalancer.md is the code's."""

from __future__ import annotations

import re
from pathlib import Path

from kccm.providers.alibabacloud.loadbalancer import nlbspec
from kccm.providers.alibabacloud.loadbalancer.annotations import (
    NLB_SUPPORTED,
    SUPPORTED,
    TABLE,
    refused,
    value,
)
from kccm.providers.alibabacloud.loadbalancer.spec import (
    BALANCER_ANNOTATIONS,
    LISTENER_ANNOTATIONS,
)

# read by build_spec and _protocol themselves
BUILD_SPEC_READS = (
    "id",
    "name",
    "additional-resource-tags",
    "force-override-listeners",
    "preserve-lb-on-delete",
    "protocol-port",
    "forward-port",
    "domain-extensions",
)
# read by backends.py
BACKENDS_READS = (
    "vgroup-port",
    "weight",
    "default-weight",
    "ignore-weight-update",
    "backend-label",
    "remove-unscheduled-backend",
)
# read by clb.py
CLB_READS = ("hostname", "type", "tunnel-type", "external-ip-type")

NLBSPEC = Path(nlbspec.__file__)
DOC = Path(__file__).resolve().parents[4] / "docs" / "providers" / "alibabacloud-loadbalancer.md"


def _rows() -> list[tuple[str, ...]]:
    rows = []
    for line in DOC.read_text().splitlines():
        match = re.match(r"^\| `([^`]+)` \|(.*)\|$", line)
        if match:
            cells = [c.strip() for c in match.group(2).split("|")]
            rows.append((match.group(1), *cells))
    return rows


def test_the_docs_table_equals_the_code() -> None:
    expected = [(a.name, a.balancer, a.default or "—", a.parse, a.status) for a in TABLE]
    assert _rows() == expected


def test_names_are_unique_and_prefixed() -> None:
    names = [a.name for a in TABLE]
    assert len(names) == len(set(names))
    assert all(
        n.startswith("service.beta.kubernetes.io/alibaba-cloud-loadbalancer-") for n in names
    )


def test_legacy_prefix_and_refusal_name_the_annotation() -> None:
    service = {
        "metadata": {
            "annotations": {
                "service.beta.kubernetes.io/alicloud-loadbalancer-spec": "slb.s2.small",
                "service.beta.kubernetes.io/alicloud-loadbalancer-listener-port-range": "1-2:80",
                "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-bandwidth-package-id": "b",
                "unrelated": "x",
            }
        }
    }
    assert value(service, "loadbalancer-spec") == "slb.s2.small"
    assert value(service, "loadbalancer-bandwidth") is None
    lines = refused(service)
    assert len(lines) == 2
    assert any("alibaba-cloud-loadbalancer-bandwidth-package-id='b'" in line for line in lines)
    assert any("alibaba-cloud-loadbalancer-listener-port-range='1-2:80'" in line for line in lines)


def test_supported_is_what_the_classic_balancer_reads() -> None:
    read = {suffix for suffix, *_ in LISTENER_ANNOTATIONS} | {
        suffix for suffix, _ in BALANCER_ANNOTATIONS
    }
    read |= {f"loadbalancer-{s}" for s in BUILD_SPEC_READS + BACKENDS_READS + CLB_READS}
    assert {f"loadbalancer-{s}" for s in SUPPORTED} == read
    nlb_only = {f"loadbalancer-{s}" for s in NLB_SUPPORTED}
    assert {a.suffix for a in TABLE if a.status == "supported"} == read | nlb_only


def test_nlb_supported_is_what_the_network_balancer_reads() -> None:
    source = NLBSPEC.read_text()
    assert all(f'"{s}"' in source or f'"loadbalancer-{s}"' in source for s in NLB_SUPPORTED)
    assert {a.suffix for a in TABLE if a.balancer == "NLB" and a.status == "supported"} == {
        f"loadbalancer-{s}" for s in NLB_SUPPORTED
    }
