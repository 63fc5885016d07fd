"""What the upstream aws-cloud-controller-manager (kubernetes/cloud-provider-aws v1.37,
``pkg/providers/v1``) leaves in AWS for a LoadBalancer Service, written with boto3 step by step
as upstream's code writes it. The migration test lays this out, then lets kccm take over.

- Classic ELB (``EnsureLoadBalancer``, non-NLB branch): the security group ``k8s-elb-<name>``
  (``buildELBSecurityGroupList``) with the Service ports and ICMP 3/4 from the source ranges
  (``createSecurityGroupRules``), the balancer with one listener per port and the cluster and
  service-name tags (``ensureLoadBalancer``), the attribute defaults, the health check
  ``TCP:<first node port>`` 2/6/5/10 (``ensureLoadBalancerHealthCheck``), the node security
  group opened to the balancer's group (``updateInstanceSecurityGroupsForLoadBalancer``), the
  instances (``ensureLoadBalancerInstances``).
- NLB (``ensureLoadBalancerv2``): the balancer, per port a target group
  ``k8s-<ns>-<name>-<hash>`` (``buildTargetGroupName``) with upstream's health check, the
  targets, a listener; the node security group rules described
  ``kubernetes.io/rule/nlb/{client,health}=<name>`` and ``kubernetes.io/rule/nlb/mtu``
  (``updateInstanceSecurityGroupsForNLB``).
"""

from __future__ import annotations

from typing import Any

from kccm.providers.aws.annotations import HealthCheck, PortMapping, target_group_name

CLIENT, HEALTH, MTU = (f"kubernetes.io/rule/nlb/{kind}" for kind in ("client", "health", "mtu"))


def _tags(cluster_id: str, service_key: str) -> list[dict[str, str]]:
    return [
        {"Key": f"kubernetes.io/cluster/{cluster_id}", "Value": "owned"},
        {"Key": "kubernetes.io/service-name", "Value": service_key},
    ]


def _node_ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(p["port"]), int(p["nodePort"])) for p in service["spec"]["ports"]]


def classic(
    ec2: Any,
    elb: Any,
    world: Any,
    service: dict[str, Any],
    name: str,
    node_group: str,
) -> str:
    """Upstream's Classic ELB for ``service``; returns its DNS name."""
    meta = service["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    own = ec2.create_security_group(
        GroupName=f"k8s-elb-{name}",
        Description=f"Security group for Kubernetes ELB {name} ({key})",
        VpcId=world.vpc_id,
        TagSpecifications=[
            {"ResourceType": "security-group", "Tags": _tags(world.cluster_id, key)[:1]}
        ],
    )["GroupId"]
    world_range = [{"CidrIp": "0.0.0.0/0"}]
    ports = _node_ports(service)
    ec2.authorize_security_group_ingress(
        GroupId=own,
        IpPermissions=[
            *(
                {"IpProtocol": "tcp", "FromPort": p, "ToPort": p, "IpRanges": world_range}
                for p, _ in ports
            ),
            {"IpProtocol": "icmp", "FromPort": 3, "ToPort": 4, "IpRanges": world_range},
        ],
    )
    elb.create_load_balancer(
        LoadBalancerName=name,
        Listeners=[
            {"Protocol": "tcp", "LoadBalancerPort": p, "InstanceProtocol": "tcp", "InstancePort": n}
            for p, n in ports
        ],
        Subnets=world.subnet_ids,
        SecurityGroups=[own],
        Tags=_tags(world.cluster_id, key),
    )
    elb.modify_load_balancer_attributes(
        LoadBalancerName=name,
        LoadBalancerAttributes={
            "AccessLog": {"Enabled": False},
            "ConnectionDraining": {"Enabled": False},
            "ConnectionSettings": {"IdleTimeout": 60},
            "CrossZoneLoadBalancing": {"Enabled": False},
        },
    )
    elb.configure_health_check(
        LoadBalancerName=name,
        HealthCheck={
            "Target": f"TCP:{ports[0][1]}",
            "HealthyThreshold": 2,
            "UnhealthyThreshold": 6,
            "Timeout": 5,
            "Interval": 10,
        },
    )
    ec2.authorize_security_group_ingress(
        GroupId=node_group,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": own}]}],
    )
    elb.register_instances_with_load_balancer(
        LoadBalancerName=name, Instances=[{"InstanceId": i} for i in sorted(world.instances)]
    )
    described = elb.describe_load_balancers(LoadBalancerNames=[name])
    return str(described["LoadBalancerDescriptions"][0]["DNSName"])


def _health(service: dict[str, Any]) -> HealthCheck:
    """Upstream ``buildNLBHealthCheckConfiguration`` (defaults only)."""
    spec = service["spec"]
    if spec.get("externalTrafficPolicy") == "Local":
        return HealthCheck(str(spec["healthCheckNodePort"]), "/healthz", "HTTP", 10, 2, 2)
    return HealthCheck()


def nlb(
    ec2: Any,
    elbv2: Any,
    world: Any,
    service: dict[str, Any],
    name: str,
    node_group: str,
) -> str:
    """Upstream's NLB for ``service`` (``aws-load-balancer-type: nlb``); returns its DNS name."""
    meta = service["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    tags = _tags(world.cluster_id, key)
    lb = elbv2.create_load_balancer(
        Name=name, Type="network", Scheme="internet-facing", Subnets=world.subnet_ids, Tags=tags
    )["LoadBalancers"][0]
    hc = _health(service)
    for port, node_port in _node_ports(service):
        mapping = PortMapping(port, "TCP", node_port, hc)
        params: dict[str, Any] = {
            "Name": target_group_name(world.cluster_id, meta["namespace"], meta["name"], mapping),
            "Protocol": "TCP",
            "Port": node_port,
            "VpcId": world.vpc_id,
            "TargetType": "instance",
            "HealthCheckProtocol": hc.protocol,
            "HealthCheckPort": hc.port,
            "HealthCheckIntervalSeconds": hc.interval,
            "HealthyThresholdCount": hc.healthy,
            "UnhealthyThresholdCount": hc.unhealthy,
            "Tags": tags,
        }
        if hc.protocol != "TCP":
            params["HealthCheckPath"] = hc.path
        group = elbv2.create_target_group(**params)["TargetGroups"][0]["TargetGroupArn"]
        elbv2.register_targets(
            TargetGroupArn=group,
            Targets=[{"Id": i, "Port": node_port} for i in sorted(world.instances)],
        )
        elbv2.create_listener(
            LoadBalancerArn=lb["LoadBalancerArn"],
            Port=port,
            Protocol="TCP",
            DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
            Tags=tags,
        )
    _nlb_rules(ec2, world, service, name, node_group, hc)
    return str(lb["DNSName"])


def _nlb_rules(
    ec2: Any, world: Any, service: dict[str, Any], name: str, node_group: str, hc: HealthCheck
) -> None:
    node_ports = [n for _, n in _node_ports(service)]
    health_ports = node_ports if hc.port == "traffic-port" else [int(hc.port)]

    def rule(proto: str, port: int, to: int, cidr: str, desc: str) -> dict[str, Any]:
        return {
            "IpProtocol": proto,
            "FromPort": port,
            "ToPort": to,
            "IpRanges": [{"CidrIp": cidr, "Description": desc}],
        }

    perms = [rule("tcp", p, p, "0.0.0.0/0", f"{CLIENT}={name}") for p in node_ports]
    if health_ports != node_ports:  # else covered by the client rule (upstream's shortcut)
        subnets = ec2.describe_subnets(SubnetIds=world.subnet_ids)["Subnets"]
        perms += [
            rule("tcp", p, p, s["CidrBlock"], f"{HEALTH}={name}")
            for p in health_ports
            for s in subnets
        ]
    group = ec2.describe_security_groups(GroupIds=[node_group])["SecurityGroups"][0]
    has_mtu = any(
        r.get("Description") == MTU for p in group["IpPermissions"] for r in p.get("IpRanges", ())
    )
    if not has_mtu:
        perms.append(rule("icmp", 3, 4, "0.0.0.0/0", MTU))
    ec2.authorize_security_group_ingress(GroupId=node_group, IpPermissions=perms)
