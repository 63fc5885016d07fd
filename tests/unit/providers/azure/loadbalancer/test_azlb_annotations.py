"""Annotations read as upstream v1.36.5 reads them (pkg/consts/helpers.go): switches, trimmed
32-bit numbers with their ranges, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from azlb_fake_arm import service, settings

from kccm.cloudprovider import InvalidServiceConfig
from kccm.providers.azure.loadbalancer import annotations as A
from kccm.providers.azure.loadbalancer.annotations import read_annotations
from kccm.providers.azure.loadbalancer.lbrules import expected_rules

PLS = "service.beta.kubernetes.io/azure-pls-create"


def _read(**values: str) -> A.ServiceAnnotations:
    return read_annotations(service(annotations=values))


@pytest.mark.parametrize(
    ("values", "field", "want"),
    [
        pytest.param({}, "idle_timeout", 4, id="idle-default"),
        pytest.param({A.IDLE_TIMEOUT: " 30 "}, "idle_timeout", 30, id="idle-trimmed"),
        pytest.param({A.INTERNAL: "true"}, "internal", True, id="internal"),
        pytest.param({A.INTERNAL: "True"}, "internal", False, id="internal-exactly-true"),
        pytest.param({A.DISABLE_TCP_RESET: "TRUE"}, "disable_tcp_reset", True, id="switch-case"),
        pytest.param({A.DISABLE_TCP_RESET: "yes"}, "disable_tcp_reset", False, id="switch-other"),
        pytest.param({A.INTERNAL_SUBNET: "apps"}, "internal_subnet", None, id="subnet-external"),
        pytest.param(
            {A.INTERNAL: "true", A.INTERNAL_SUBNET: " "}, "internal_subnet", None, id="subnet-blank"
        ),
        pytest.param(
            {A.ALLOWED_SERVICE_TAGS: " AzureCloud, Storage "},
            "allowed_service_tags",
            ("AzureCloud", "Storage"),
            id="service-tags",
        ),
        pytest.param(
            {A.ADDITIONAL_PUBLIC_IPS: "1.2.3.4,5.6.7.8"},
            "additional_public_ips",
            ("1.2.3.4", "5.6.7.8"),
            id="additional-ips",
        ),
    ],
)
def test_reads(values: dict[str, str], field: str, want: Any) -> None:
    assert getattr(_read(**values), field) == want


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({A.IDLE_TIMEOUT: "3"}, id="idle-below-4"),
        pytest.param({A.IDLE_TIMEOUT: "101"}, id="idle-above-100"),
        pytest.param({A.IDLE_TIMEOUT: "ten"}, id="idle-not-a-number"),
        pytest.param({A.IDLE_TIMEOUT: "4294967296"}, id="idle-not-32-bits"),
        pytest.param({A.ADDITIONAL_PUBLIC_IPS: "1.2.3.4, 5.6.7.8"}, id="additional-ip-space"),
        pytest.param({PLS: "true"}, id="refused"),
    ],
)
def test_refuses_naming_the_annotation(values: dict[str, str]) -> None:
    with pytest.raises(InvalidServiceConfig) as caught:
        _read(**values)
    assert next(iter(values)) in str(caught.value)


def test_a_service_being_deleted_is_read_leniently() -> None:
    svc = service(annotations={A.IDLE_TIMEOUT: "ten", PLS: "true"})
    assert read_annotations(svc, lenient=True).idle_timeout == 4


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        pytest.param({A.PROBE_INTERVAL: "4"}, "minimum value of interval", id="interval-min"),
        pytest.param({A.PROBE_NUM: "1"}, "minimum value of num-of-probe", id="num-min"),
        pytest.param({A.PROBE_INTERVAL: "20", A.PROBE_NUM: "6"}, "less than 120", id="total"),
    ],
)
def test_probe_numbers_are_checked(values: dict[str, str], problem: str) -> None:
    svc = service(annotations=values)
    with pytest.raises(InvalidServiceConfig, match=problem):
        expected_rules(
            svc, read_annotations(svc), settings(), lb_name="k", frontend_id="f", pool_id="p"
        )


def test_port_probe_annotations_come_first() -> None:
    values = {
        A.PROBE_PROTOCOL: "Http",
        A.port_key(A.PORT_PROBE, 80, "protocol"): "Https",
        A.port_key(A.PORT_PROBE, 80, "request-path"): "/ready",
        A.port_key(A.PORT_PROBE, 80, "port"): "8080",
    }
    svc = service(annotations=values)
    got = expected_rules(
        svc, read_annotations(svc), settings(), lb_name="k", frontend_id="f", pool_id="p"
    )
    assert got.probes[0]["properties"] | {} == {
        "port": 8080,
        "protocol": "Https",
        "requestPath": "/ready",
        "intervalInSeconds": 5,
        "probeThreshold": 2,
    }
