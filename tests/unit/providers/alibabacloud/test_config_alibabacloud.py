"""Upstream's cloud config (pkg/config/cloud_config.go v2.14.0) read as Go reads it."""

from __future__ import annotations

import base64
import logging

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.providers.alibabacloud.config import FIELDS, load_alibaba_config


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_every_key_of_global_is_read_from_yaml() -> None:
    text = f"""
Global:
  uid: "123"
  accessKeyID: {b64("AKID")}
  accessKeySecret: {b64("SECRET")}
  clusterID: c1
  kubernetesClusterTag: my-tag
  region: cn-hangzhou
  vpcid: vpc-1
  zoneid: cn-hangzhou-k
  vswitchid: cn-hangzhou-k:vsw-1
  resourceGroupID: "  rg-1  "
  serviceMaxConcurrentReconciles: 5
  serviceBackendType: eni
  disablePublicSLB: true
  nodeMaxConcurrentReconciles: 2
  nodeMonitorPeriod: 60
  nodeAddrSyncPeriod: 120
  routeMaxConcurrentReconciles: 4
  routeTableIDs: " vtb-1,vtb-2 "
  privateZoneId: pz-1
  privateZoneRecordTTL: 30
  featureGates: IPv6DualStack=true
"""
    config = load_alibaba_config(text, "cc.yaml")
    assert config.uid == "123"
    assert config.access_key_pair() == ("AKID", "SECRET")
    assert config.cluster_tag == "my-tag"
    assert (config.region, config.vpc_id, config.zone_id) == (
        "cn-hangzhou",
        "vpc-1",
        "cn-hangzhou-k",
    )
    assert config.resource_group_id == "rg-1"
    assert config.route_tables == ["vtb-1", "vtb-2"]
    assert (config.service_max_concurrent_reconciles, config.disable_public_slb) == (5, True)
    assert (config.node_monitor_period, config.private_zone_record_ttl) == (60, 30)
    assert config.gates["IPv6DualStack"] is True
    assert config.reads_metadata_from_config
    assert len(FIELDS) == 21


def test_defaults_as_set_default_value() -> None:
    config = load_alibaba_config("Global: {}\n")
    assert (
        config.service_max_concurrent_reconciles,
        config.node_max_concurrent_reconciles,
        config.route_max_concurrent_reconciles,
    ) == (3, 1, 1)
    assert config.cluster_tag == "ack.aliyun.com"
    assert config.gates == {
        "IPv6DualStack": False,
        "EndpointSlice": True,
        "FilterServiceOnNodeChange": False,
        "LoadBalancerTypeAnnotation": False,
    }
    assert not config.reads_metadata_from_config


@pytest.mark.parametrize(
    ("text", "attr", "expected"),
    [
        pytest.param('{"Global": {"vpcid": "vpc-j"}}', "vpc_id", "vpc-j", id="json"),
        pytest.param("global:\n  VPCID: vpc-x\n", "vpc_id", "vpc-x", id="case-insensitive"),
        pytest.param("Global:\n  vpcid: 123\n", "vpc_id", "123", id="number-for-string"),
        pytest.param("Global:\n  clusterID: true\n", "cluster_id", "true", id="bool-for-string"),
        pytest.param("Global:\n  vpcid: a\n  VpcId: b\n", "vpc_id", "b", id="last-wins"),
        pytest.param("Global:\n  vpcid: null\n", "vpc_id", "", id="null-keeps-default"),
        pytest.param(
            "Global:\n  nodeMonitorPeriod: 5.0\n", "node_monitor_period", 5, id="int-float"
        ),
    ],
)
def test_go_decoding(text: str, attr: str, expected: object) -> None:
    assert getattr(load_alibaba_config(text), attr) == expected


def test_unknown_keys_are_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        config = load_alibaba_config("Global:\n  vpcId: v\n  routeTableId: t\nOther: {}\n")
    assert config.vpc_id == "v"
    assert config.route_table_ids == ""
    assert "routeTableId" in caplog.text
    assert "Other" in caplog.text


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param(
            'Global:\n  serviceMaxConcurrentReconciles: "3"\n',
            "serviceMaxConcurrentReconciles",
            id="string-for-int",
        ),
        pytest.param(
            "Global:\n  nodeMonitorPeriod: true\n", "nodeMonitorPeriod", id="bool-for-int"
        ),
        pytest.param("Global:\n  nodeMonitorPeriod: 1.5\n", "nodeMonitorPeriod", id="fraction"),
        pytest.param(
            'Global:\n  disablePublicSLB: "true"\n', "disablePublicSLB", id="string-for-bool"
        ),
        pytest.param("Global:\n  vpcid: [a]\n", "vpcid", id="list-for-string"),
        pytest.param(
            "Global:\n  featureGates: IPv6DualStack\n", "featureGates", id="gate-without-value"
        ),
        pytest.param(
            "Global:\n  featureGates: IPv6DualStack=maybe\n", "featureGates", id="gate-not-bool"
        ),
        pytest.param(
            "Global:\n  accessKeyID: '%%%'\n  accessKeySecret: '%%%'\n",
            "accessKeyID",
            id="key-not-base64",
        ),
        pytest.param("Global: [1]\n", "Global", id="global-not-mapping"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(text: str, key: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_alibaba_config(text, "cc.yaml")
    assert len(caught.value.issues) == 1
    assert "\n" not in str(caught.value)
    assert key in str(caught.value)


def test_no_secret_in_repr_or_errors() -> None:
    config = load_alibaba_config(
        f"Global:\n  accessKeyID: {b64('AKIDSECRETID')}\n  accessKeySecret: {b64('TOPSECRET')}\n"
    )
    shown = repr(config)
    assert "AKIDSECRETID" not in shown
    assert b64("TOPSECRET") not in shown
    assert "TOPSECRET" not in shown
    with pytest.raises(CloudConfigError) as caught:
        load_alibaba_config(
            "Global:\n  accessKeySecret: TOPSECRET-NOT-A-BOOL-OR-INT\n  nodeMonitorPeriod: x\n"
        )
    assert "TOPSECRET" not in str(caught.value)
