"""The ``aws`` provider's cloud for the chaos bench (bench/chaos.py): moto in server mode (this
process) with a VPC world of instances, behind the fault proxy (every 11th EC2/ELB request
answered ``Throttling``), which records every request with its arrival time and the caller's
access key id. Each daemon gets its own key id, so the proxy's ledger names the process that
made each call. Balancers are Classic ELBs (upstream's default); the annotation the workload
changes is the idle timeout (an attribute kccm must keep in step)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.emulators import aws as support
from kccm.kube.interface import Obj
from kccm.testing.chaos.leadership import Mutation
from kccm.testing.chaos.world import Balancer
from kccm.testing.kubelet import kubelet_node

IDLE_TIMEOUT = "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout"
SERVICE_NAME_TAG = "kubernetes.io/service-name"
INSTANCES = 8
LABEL = "chaos.kccm.io/run"
READS = ("Describe", "Get", "List")


def _key_id(index: int) -> str:
    return f"AKIACHAOS{index:08d}"


@dataclass
class AwsWorld:
    tmp: Path
    run: str
    world: Any
    proxy: Any
    stack: contextlib.ExitStack
    provider: str = "aws"
    annotation: str = IDLE_TIMEOUT
    ledger: list[Any] = field(default_factory=list)
    _free: list[str] = field(default_factory=list)
    _used: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, tmp: Path, run: str) -> AwsWorld:
        stack = contextlib.ExitStack()
        url = stack.enter_context(support.moto_emulator()).url
        world = support.build_world(url, run, INSTANCES, 20 + secrets.randbelow(200))
        ledger: list[Any] = []
        proxy = support.FaultProxy(url, support.every_nth(11), ledger=ledger).start()
        stack.callback(proxy.stop)
        made = cls(tmp, run, world, proxy, stack, ledger=ledger)
        made._free = list(world.instances.values())
        return made

    def cloud_config(self) -> Path:
        config = self.tmp / "aws.conf"
        config.write_text(self.world.cloud_config(self.proxy.url, APIMaxAttempts="6"))
        return config

    def env_for(self, index: int) -> Mapping[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": _key_id(index),
            "AWS_SECRET_ACCESS_KEY": support.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        }

    def daemon_flags(self) -> Sequence[str]:
        return ()

    def annotation_value(self, pick: int) -> str:
        return str(10 + pick % 290)

    def service_annotations(self) -> Mapping[str, str]:
        return {}

    def new_node(self) -> Obj | None:
        if not self._free:
            return None
        name = self._free.pop(0)
        node = kubelet_node(name)
        node["metadata"]["labels"][LABEL] = self.run
        self._used[name] = name
        return node

    def node_deleted(self, name: str) -> None:
        if self._used.pop(name, None) is not None:
            self._free.append(name)

    def _elb(self) -> Any:
        return support.client(self.world.url, "elb")

    def balancers(self) -> list[Balancer]:
        elb = self._elb()
        found = [
            lb
            for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]
            if lb.get("VPCId") == self.world.vpc_id
        ]
        names = [lb["LoadBalancerName"] for lb in found]
        tags: dict[str, dict[str, str]] = {}
        for start in range(0, len(names), 20):
            for described in elb.describe_tags(LoadBalancerNames=names[start : start + 20])[
                "TagDescriptions"
            ]:
                tags[described["LoadBalancerName"]] = {
                    t["Key"]: t.get("Value", "") for t in described.get("Tags", [])
                }
        result = []
        for lb in found:
            name = lb["LoadBalancerName"]
            attributes = elb.describe_load_balancer_attributes(LoadBalancerName=name)
            idle = attributes["LoadBalancerAttributes"].get("ConnectionSettings", {})
            listeners = sorted(
                (
                    int(d["Listener"]["LoadBalancerPort"]),
                    str(d["Listener"]["Protocol"]).upper(),
                    int(d["Listener"]["InstancePort"]),
                )
                for d in lb.get("ListenerDescriptions", [])
            )
            result.append(
                Balancer(
                    name,
                    tags.get(name, {}).get(SERVICE_NAME_TAG, "?"),
                    lb["DNSName"],
                    {
                        "ports": listeners,
                        "instances": sorted(i["InstanceId"] for i in lb.get("Instances", [])),
                        "idle_timeout": int(idle.get("IdleTimeout", 60)),
                    },
                )
            )
        return result

    def stale(self, service: Obj, nodes: Sequence[Obj], balancer: Balancer) -> list[str]:
        spec = service.get("spec") or {}
        annotation = (service["metadata"].get("annotations") or {}).get(IDLE_TIMEOUT)
        wanted = {
            "ports": sorted(
                (int(p["port"]), str(p.get("protocol", "TCP")), int(p.get("nodePort") or 0))
                for p in spec.get("ports") or ()
            ),
            "instances": sorted(
                str(n["spec"]["providerID"]).rsplit("/", 1)[1]
                for n in nodes
                if (n.get("spec") or {}).get("providerID", "").startswith("aws://")
            ),
            "idle_timeout": int(annotation) if annotation else 60,
        }
        return [
            f"{key} {balancer.detail.get(key)} != {value}"
            for key, value in wanted.items()
            if balancer.detail.get(key) != value
        ]

    def other_leftovers(self, services: Sequence[Obj]) -> list[str]:
        """``k8s-elb-*`` security groups of balancers that no longer exist."""
        ec2 = support.client(self.world.url, "ec2")
        balancers = {
            lb["LoadBalancerName"]
            for lb in self._elb().describe_load_balancers()["LoadBalancerDescriptions"]
        }
        groups = ec2.describe_security_groups(
            Filters=[{"Name": "vpc-id", "Values": [self.world.vpc_id]}]
        )["SecurityGroups"]
        return [
            f"security group {g['GroupName']}"
            for g in groups
            if g["GroupName"].startswith("k8s-elb-")
            and g["GroupName"].removeprefix("k8s-elb-") not in balancers
        ]

    def mutations(self, logs: Mapping[int, Path]) -> list[Mutation]:
        index = {_key_id(i): i for i in logs}
        return [
            Mutation(
                index[call.access_key], call.arrived, call.action, call.service, str(call.status)
            )
            for call in list(self.ledger)
            if not call.action.startswith(READS) and call.access_key in index
        ]

    def made_and_deleted(self, mutations: Sequence[Mutation]) -> tuple[int, int]:
        made = sum(m.operation == "CreateLoadBalancer" and m.outcome == "200" for m in mutations)
        deleted = sum(m.operation == "DeleteLoadBalancer" and m.outcome == "200" for m in mutations)
        return made, deleted

    def close(self) -> None:
        self.stack.close()
