"""The Alibaba Cloud emulator driven by kccm's ``alibabacloud`` provider, as the daemon would
use it (issue 38): the signature is checked, Node initialisation reads ECS (and turns off the
source/destination check), routes go into the VPC's route table and out again, the metadata
service hands out IMDSv2 tokens and RAM-role keys the APIs accept, a throttling fault reaches
the provider as Alibaba's code, and every test leaves the emulator as it found it."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from alibaba_emu_support import VPC, VSWITCH, b64, parts, parts_for, seeded

from kccm.cloudprovider import Route
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.providers.alibabacloud.errors import AlibabaError


def node(instance: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": instance["InstanceId"]},
        "spec": {"providerID": f"cn-hangzhou.{instance['InstanceId']}"},
    }


@pytest.fixture
def instance(clean: AlibabaEmulator) -> Iterator[dict[str, Any]]:
    yield from seeded(clean, "10.0.0.5", instance_type="ecs.g7.xlarge", zone="cn-hangzhou-k")


def test_node_initialisation_reads_ecs(clean: AlibabaEmulator, instance: dict[str, Any]) -> None:
    meta = parts(clean).instances.instance_metadata(node(instance))
    assert meta.provider_id == f"cn-hangzhou.{instance['InstanceId']}"
    assert meta.instance_type == "ecs.g7.xlarge"
    assert (meta.zone, meta.region) == ("cn-hangzhou-k", "cn-hangzhou")
    assert ("InternalIP", "10.0.0.5") in {(a.type, a.address) for a in meta.node_addresses}
    calls = [r["action"] for r in clean.admin.requests() if r["service"] == "ecs"]
    assert "DescribeInstances" in calls


@pytest.mark.parametrize(
    ("status", "exists", "shutdown"),
    [("Running", True, False), ("Stopped", True, False), (None, False, False)],
    ids=["running", "stopped-never-shut-down-as-upstream", "deleted"],
)
def test_exists_and_shutdown_follow_the_instance(
    clean: AlibabaEmulator,
    instance: dict[str, Any],
    status: str | None,
    exists: bool,
    shutdown: bool,
) -> None:
    made, the = parts(clean).instances, node(instance)
    if status is None:
        clean.admin.delete_instance(instance["InstanceId"])
    else:
        clean.admin.set_status(instance["InstanceId"], status)
    assert made.instance_exists(the) is exists
    if exists:
        assert made.instance_shutdown(the) is shutdown


def test_a_wrong_secret_is_refused_by_the_signature_check(clean: AlibabaEmulator) -> None:
    wrong = parts_for(
        clean,
        region="cn-hangzhou",
        vpcid=VPC,
        vswitchid=VSWITCH,
        accessKeyID=b64("kccm-ak"),
        accessKeySecret=b64("not-the-secret"),
    )
    with pytest.raises(AlibabaError, match="SignatureDoesNotMatch"):
        wrong.rpc.call("ecs", "DescribeInstances", {"RegionId": "cn-hangzhou"})


def test_an_unsigned_request_is_refused(clean: AlibabaEmulator) -> None:
    url = f"{clean.url}/?Action=DescribeInstances&Version=2014-05-26&AccessKeyId=kccm-ak"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 400
    assert b"SignatureDoesNotMatch" in err.value.read()


class Directory:
    """The Nodes' providerIDs by name, as the provider's Node directory gives them."""

    def __init__(self, instances: dict[str, str]) -> None:
        self.by_name = {name: f"cn-hangzhou.{i}" for name, i in instances.items()}

    def names(self, instances: set[str]) -> dict[str, str]:
        return {
            pid.split(".", 1)[1]: n
            for n, pid in self.by_name.items()
            if pid.split(".", 1)[1] in instances
        }

    def provider_id(self, name: str) -> str:
        return self.by_name.get(name, "")


def test_a_route_goes_into_the_vpc_table_and_out_again(
    clean: AlibabaEmulator, instance: dict[str, Any]
) -> None:
    table = clean.admin.add_route_table(VPC)
    made = parts(clean)
    made.routes.directory = Directory({"node-a": instance["InstanceId"]})  # type: ignore[assignment]
    route = Route(name="", target_node="node-a", destination_cidr="10.244.1.0/24")
    made.routes.create_route("c", "hint", route)
    made.routes.create_route("c", "hint", route)  # read-compare-write: nothing more
    listed = made.routes.list_routes("c")
    assert [(r.target_node, r.destination_cidr) for r in listed] == [("node-a", "10.244.1.0/24")]
    created = [r for r in clean.admin.requests() if r["action"] == "CreateRouteEntry"]
    assert len(created) == 1
    assert created[0]["params"]["RouteTableId"] == table
    made.routes.delete_route("c", listed[0])
    assert made.routes.list_routes("c") == []
    # the table itself is the test's: gone with it
    clean.admin.delete_route_table(table)


def test_throttling_reaches_the_provider_as_alibabas_code(
    clean: AlibabaEmulator, instance: dict[str, Any]
) -> None:
    clean.admin.fault("DescribeInstances", code="Throttling.User", status=400)
    with pytest.raises(AlibabaError, match=r"Throttling\.User"):
        parts(clean).instances.instance_metadata(node(instance))
    assert parts(clean).instances.instance_exists(node(instance))


def test_the_metadata_service_gives_a_token_then_the_region_and_role_keys(
    clean: AlibabaEmulator, instance: dict[str, Any]
) -> None:
    clean.admin.set_metadata_instance(instance["InstanceId"])
    since = clean.admin.last_seq()
    made = parts_for(clean, clusterID="c-kccm")  # region, VPC and keys from the metadata service
    assert (made.region, made.vpc_id) == ("cn-hangzhou", VPC)
    meta = made.instances.instance_metadata(node(instance))
    assert meta.instance_type == instance["InstanceType"]
    paths = [r["path"] for r in clean.admin.requests(since) if r["service"] == "metadata"]
    assert paths[0] == "api/token"
    assert "ram/security-credentials/KubernetesWorkerRole" in paths


def test_initialising_a_node_turns_the_source_dest_check_off_once(
    clean: AlibabaEmulator, instance: dict[str, Any]
) -> None:
    uninitialised = node(instance)
    uninitialised["spec"]["taints"] = [
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}
    ]
    made = parts(clean)
    since = clean.admin.last_seq()
    made.instances.instance_metadata(uninitialised)
    assert clean.admin.instance(instance["InstanceId"])["source_dest_check"] is False
    made.instances.instance_metadata(uninitialised)  # already off: read, no second write
    writes = [r["action"] for r in clean.admin.mutating(since)]
    assert writes == ["ModifyNetworkInterfaceAttribute"]
