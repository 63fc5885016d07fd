"""Test support for the aws provider: moto as a real HTTP server, a VPC world, a fault proxy.

Imported by the unit, conformance and integration tests (the tests directories are not
packages: the latter two load this file by path with ``load()`` of their own).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import boto3
import botocore.exceptions
import botocore.loaders
from moto import backends as moto_backends
from moto.server import ThreadedMotoServer

from kccm.testing.modules import load_module
from kccm.testing.ports import free_port

_elb = load_module("aws_moto_elb", Path(__file__).with_name("aws_moto_elb.py"))

T = TypeVar("T")
REGION = "eu-west-1"
ZONES = ("eu-west-1a", "eu-west-1b")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


# -- DescribeInstanceTopology, which moto 5 does not know ------------------------------------

TOPOLOGY_TYPES = re.compile(
    r"^(g6e|g7e|hpc6a|hpc6id|hpc7a|hpc7g|hpc8a|p3dn|p4d|p4de|p5|p5e|p5en|trn1|trn1n|trn2|trn2u"
    r"|p6-b200)\."
)
"""Instance types AWS documents as having a topology (API reference and "Prerequisites for
Amazon EC2 topology"); ``p6-b200`` answers four network nodes, the others three."""
TOPOLOGY_FAULT: dict[str, str] = {}
"""``{"code": ...}`` makes every DescribeInstanceTopology answer that EC2 error (tests set it
with :func:`topology_fault`)."""


def network_nodes_of(instance_id: str, zone: str, instance_type: str) -> list[str]:
    """The network nodes the taught moto reports for an instance, top layer first: shared by
    the zone's instances at the first layer(s), the instance's own at the last."""
    layers = 4 if instance_type.startswith("p6-b200.") else 3
    seeds = [f"{zone}/{layer}" for layer in range(1, layers)] + [instance_id]
    return ["nn-" + hashlib.sha256(seed.encode()).hexdigest()[:17] for seed in seeds]


@contextmanager
def topology_fault(code: str) -> Iterator[None]:
    """While inside, DescribeInstanceTopology fails with EC2 error ``code``."""
    TOPOLOGY_FAULT["code"] = code
    try:
        yield
    finally:
        TOPOLOGY_FAULT.clear()


def _teach_instance_topology() -> None:
    """Give moto's EC2 ``DescribeInstanceTopology`` (moto 5 has none): AWS's documented
    answer, ``Instances`` (``instanceSet``) with ``InstanceId``, ``InstanceType``,
    ``NetworkNodes``, ``AvailabilityZone``, ``ZoneId``, paged by ``MaxResults`` (default 20,
    not with ``InstanceIds``) and ``NextToken``. Only running instances of a supported type
    are listed. Patched on moto's response class, so both moto's in-process mock and its
    server (which serves from this process, as :func:`moto_server` runs it) answer."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError, InvalidParameterCombination
    from moto.ec2.responses import EC2Response

    response_class: Any = EC2Response
    if hasattr(response_class, "describe_instance_topology"):
        return

    def describe_instance_topology(self: Any) -> ActionResult:
        if code := TOPOLOGY_FAULT.get("code"):
            raise EC2ClientError(code, f"kccm test fault: {code}")
        ids = set(self._get_param("InstanceIds", []))
        if ids and self._get_param("MaxResults") is not None:
            raise InvalidParameterCombination("MaxResults cannot be used with InstanceIds")
        listed = [
            _topology_of(self.ec2_backend, instance)
            for instance in self.ec2_backend.all_instances()
            if (not ids or instance.id in ids)
            and instance.state == "running"
            and TOPOLOGY_TYPES.match(instance.instance_type)
        ]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 20)
        page = listed[start : start + size]
        more = start + size < len(listed)
        return ActionResult({"Instances": page, "NextToken": str(start + size) if more else None})

    response_class.describe_instance_topology = describe_instance_topology


def _topology_of(backend: Any, instance: Any) -> dict[str, Any]:
    zone = str(instance.placement.zone)
    found = backend.get_zone_by_name(zone)
    return {
        "InstanceId": instance.id,
        "InstanceType": instance.instance_type,
        "NetworkNodes": network_nodes_of(instance.id, zone, instance.instance_type),
        "AvailabilityZone": zone,
        "ZoneId": found.zone_id if found is not None else "",
    }


_LIVE: dict[str, dict[str, Any]] = {}
"""The moto servers this process runs, by URL, each with the test-side clients made for it so
far (by service). The servers share one state: moto keeps its backends per process, not per
server."""
_LIVE_LOCK = threading.Lock()


def _list_moto_modules_once() -> None:
    """moto's server lists its own package directory (a ``listdir`` and ~170 ``isdir``) for
    every request it dispatches, to learn whether the Host names a service; the listing is
    the installed package's, so it is taken once here."""
    listing: Any = moto_backends.list_of_moto_modules
    if getattr(listing, "_kccm_once", False):
        return
    modules = tuple(listing())

    def list_of_moto_modules() -> Iterator[str]:
        return iter(modules)

    list_of_moto_modules._kccm_once = True  # type: ignore[attr-defined]
    moto_backends.list_of_moto_modules = list_of_moto_modules


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port; yields its URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    _elb.keep_listener_instance_protocol()
    _elb.delete_listeners_by_port()
    _teach_instance_topology()
    _list_moto_modules_once()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    with _LIVE_LOCK:
        _LIVE[url] = {}
    try:
        yield url
    finally:
        with _LIVE_LOCK:
            made = _LIVE.pop(url)
        for made_client in made.values():
            made_client.close()
        server.stop()


def reset_moto(url: str) -> None:
    """Empty moto (``POST /moto-api/reset``): every service, account and region back to a
    just-started server's state. moto keeps that state per process, so this refuses while
    another moto server of this process is live: its fixture's world would be wiped too."""
    with _LIVE_LOCK:
        others = sorted(set(_LIVE) - {url})
    if others:
        raise RuntimeError(f"not resetting moto at {url}: {others} share its state")
    target = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
    try:
        conn.request("POST", "/moto-api/reset")
        reply = conn.getresponse()
        reply.read()
    finally:
        conn.close()
    if reply.status != 200:
        raise RuntimeError(f"moto at {url} answered {reply.status} to its reset")


def client(url: str, service: str) -> Any:
    """A test-side boto3 client of ``service`` talking to ``url`` directly: made once per
    live moto server of :func:`moto_server` (boto3 clients are thread-safe, and making one
    costs tens of milliseconds), anew for any other URL."""
    with _LIVE_LOCK:
        made = _LIVE.get(url)
        if made is not None and service in made:
            return made[service]
    new = boto3.client(
        service,
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    with _LIVE_LOCK:
        made = _LIVE.get(url)
        if made is None:
            return new
        kept = made.setdefault(service, new)
    if kept is not new:
        new.close()
    return kept


_LOADERS: dict[str | None, Any] = {}


def shared_loader(search_path_string: str | None = None) -> Any:
    """:func:`botocore.loaders.create_loader`, made once per search path and process: a
    stand-in for it in ``botocore.session`` (tests patch it there) lets every new boto3
    session parse botocore's service models (ec2's is megabytes of JSON) once, as the clients
    of one session already do, instead of again each time; seconds per test otherwise. The
    sessions, their credentials and clients are still each AWSCloud's own."""
    with _LIVE_LOCK:
        loader = _LOADERS.get(search_path_string)
        if loader is None:
            loader = _LOADERS[search_path_string] = botocore.loaders.create_loader(
                search_path_string
            )
        return loader


def clients(url: str) -> tuple[Any, Any]:
    """Test-side (ec2, elbv2) clients talking to ``url`` directly."""
    return client(url, "ec2"), client(url, "elbv2")


@dataclass
class World:
    """One cluster's VPC in moto: public subnets in two zones, a tagged route table, and
    instances tagged for the cluster (``instances``: id -> private DNS name; ``zones``:
    id -> availability zone)."""

    url: str
    cluster_id: str
    vpc_id: str
    subnet_ids: list[str]
    route_table_id: str
    instances: dict[str, str] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)
    """The zone of every instance :func:`add_instances` started, tagged or not."""

    def cloud_config(self, url: str | None = None, **extra: str) -> str:
        endpoint = url or self.url
        lines = [
            "[Global]",
            f"Region = {REGION}",
            f"VPC = {self.vpc_id}",
            f"KubernetesClusterID = {self.cluster_id}",
            *(f"{key} = {value}" for key, value in extra.items()),
            "",
            '[ServiceOverride "ec2"]',
            "Service = ec2",
            f"URL = {endpoint}",
            "",
            '[ServiceOverride "elb"]',
            "Service = elasticloadbalancing",
            f"URL = {endpoint}",
            "",
        ]
        return "\n".join(lines)


def cluster_tag(cluster_id: str) -> dict[str, str]:
    return {"Key": f"kubernetes.io/cluster/{cluster_id}", "Value": "owned"}


def build_world(url: str, cluster_id: str, instances: int = 3, cidr_octet: int = 10) -> World:
    """Create the VPC and ``instances`` running instances (spread over the two zones)."""
    ec2, _ = clients(url)
    tag = [cluster_tag(cluster_id)]
    vpc = ec2.create_vpc(CidrBlock=f"10.{cidr_octet}.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.{cidr_octet}.{i}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tag}],
        )["Subnet"]["SubnetId"]
        for i, zone in enumerate(ZONES)
    ]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    main = ec2.describe_route_tables(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc]},
            {"Name": "association.main", "Values": ["true"]},
        ]
    )["RouteTables"][0]["RouteTableId"]
    ec2.create_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    ec2.create_tags(Resources=[main], Tags=tag)
    world = World(url, cluster_id, vpc, subnets, main)
    add_instances(world, instances)
    return world


def add_instances(
    world: World, count: int, *, tagged: bool = True, instance_type: str = "m5.large"
) -> list[str]:
    """Start ``count`` more instances; returns their IDs. The i-th goes to subnet
    ``len(world.instances) + i`` (modulo), with ``world.instances`` counted as it grows, so
    untagged instances alternate zones while each call's tagged ones share a zone, as when
    every instance was a RunInstances of its own. One RunInstances per subnet starts them."""
    ec2, _ = clients(world.url)
    tags = [{"ResourceType": "instance", "Tags": [cluster_tag(world.cluster_id)]}] if tagged else []
    grows = 1 if tagged else 0
    first = len(world.instances)
    placed = [
        world.subnet_ids[(first + i * (1 + grows)) % len(world.subnet_ids)] for i in range(count)
    ]
    launched: dict[str, list[dict[str, Any]]] = {}
    for subnet in dict.fromkeys(placed):
        wanted = placed.count(subnet)
        reply = ec2.run_instances(
            ImageId="ami-12c6146b",
            MinCount=wanted,
            MaxCount=wanted,
            InstanceType=instance_type,
            SubnetId=subnet,
            TagSpecifications=tags,
        )
        launched[subnet] = list(reply["Instances"])
    started: list[str] = []
    for subnet in placed:
        instance = launched[subnet].pop(0)
        started.append(instance["InstanceId"])
        world.zones[instance["InstanceId"]] = instance["Placement"]["AvailabilityZone"]
        if tagged:
            world.instances[instance["InstanceId"]] = instance["PrivateDnsName"]
    return started


def provider_id_of(world: World, instance_id: str) -> str:
    """The instance's provider ID: its zone as started by :func:`add_instances` (an instance
    never changes zone), or as EC2 describes it."""
    zone = world.zones.get(instance_id)
    if zone is None:
        ec2, _ = clients(world.url)
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        zone = reservations[0]["Instances"][0]["Placement"]["AvailabilityZone"]
    return f"aws:///{zone}/{instance_id}"


def node_for(world: World, instance_id: str, *, with_provider_id: bool = True) -> dict[str, Any]:
    """A Node named after the instance's private DNS name (as kubelet on EC2 names it)."""
    spec = {"providerID": provider_id_of(world, instance_id)} if with_provider_id else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": world.instances[instance_id], "uid": instance_id, "labels": {}},
        "spec": spec,
        "status": {},
    }


def leftovers(url: str, vpc_id: str) -> dict[str, list[str]]:
    """What the provider could have left behind in ``vpc_id``: NLBs, target groups, routes to
    instances."""
    ec2, elbv2 = clients(url)
    balancers = [
        lb["LoadBalancerName"]
        for lb in elbv2.describe_load_balancers()["LoadBalancers"]
        if lb["VpcId"] == vpc_id
    ]
    groups = [
        g["TargetGroupName"]
        for g in elbv2.describe_target_groups()["TargetGroups"]
        if g["VpcId"] == vpc_id
    ]
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
        "RouteTables"
    ]
    routes = [r["DestinationCidrBlock"] for t in tables for r in t["Routes"] if r.get("InstanceId")]
    return {"load_balancers": balancers, "target_groups": groups, "routes": routes}


GONE_MEANWHILE = frozenset({"LoadBalancerNotFound", "ListenerNotFound", "TargetGroupNotFound"})
"""Error codes of a read that names what an earlier read returned and the provider has
replaced or deleted since (a target group replaced on a port change, a balancer deleted)."""


def read_while_changing(read: Callable[[], T]) -> T | None:
    """``read()``, or None when it met :data:`GONE_MEANWHILE`: a test's probe that walks
    balancer -> listeners -> target groups while the provider changes them reads again later
    instead of failing."""
    try:
        return read()
    except botocore.exceptions.ClientError as err:
        if err.response.get("Error", {}).get("Code") in GONE_MEANWHILE:
            return None
        raise


# -- the fault proxy ---------------------------------------------------------------------------

_ACTION = re.compile(r"(?:^|&)Action=([A-Za-z0-9]+)")
_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([a-z0-9-]+)/")
_ACCESS_KEY = re.compile(r"Credential=([^/]+)/")


@dataclass(frozen=True)
class ProxyCall:
    """One request the proxy passed on or answered itself: when it arrived and was answered
    (``time.time()``), the caller's access key id (which process sent it, when each has its
    own), the service, the action and the HTTP status answered."""

    arrived: float
    answered: float
    access_key: str
    service: str
    action: str
    status: int


THROTTLING_BODY = (
    '<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">'
    "<Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
    "<RequestId>kccm-fault-proxy</RequestId></ErrorResponse>"
)
EC2_THROTTLING_BODY = (
    "<Response><Errors><Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
    "</Errors><RequestID>kccm-fault-proxy</RequestID></Response>"
)


class _ProxyServer(ThreadingHTTPServer):
    """socketserver listens with a backlog of 5: a burst of connections (six route deletions
    at once) while this process is busy overflows it, and a dropped SYN costs the client
    1 + 2 + 4 ... seconds of retransmission, long enough to stall a controller's reconcile
    for a minute. werkzeug (moto's server) listens with 128."""

    request_queue_size = 128


def error_body(service: str, code: str, message: str) -> str:
    """An AWS error answer with ``code`` as ``service`` (ec2's shape or the query APIs')."""
    if service == "ec2":
        return (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            "</Errors><RequestID>kccm-fault-proxy</RequestID></Response>"
        )
    return (
        '<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">'
        f"<Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        "<RequestId>kccm-fault-proxy</RequestId></ErrorResponse>"
    )


@dataclass
class FaultProxy:
    """An HTTP proxy in front of moto that answers ``Throttling`` to the requests ``throttle``
    selects (called with service, action and the request's sequence number), and the error
    code ``refuse`` returns (``AccessDenied``, ...; None: pass) to the others."""

    upstream: str
    throttle: Callable[[str, str, int], bool] = lambda service, action, seq: False
    refuse: Callable[[str, str], str | None] = lambda service, action: None
    refused: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    throttled: Counter[str] = field(default_factory=Counter)
    url: str = ""
    ledger: list[ProxyCall] | None = None
    """When a list, every request is appended to it (:class:`ProxyCall`)."""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: int = 0

    def decide(self, service: str, action: str) -> bool:
        with self._lock:
            self._seq += 1
            self.requests[f"{service}:{action}"] += 1
            hit = self.throttle(service, action, self._seq)
            if hit:
                self.throttled[f"{service}:{action}"] += 1
            return hit

    def start(self) -> FaultProxy:
        target = urllib.parse.urlsplit(self.upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.arrived = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                match = _ACTION.search(body.decode(errors="replace"))
                scope = _SERVICE.search(self.headers.get("Authorization", ""))
                service = scope.group(1) if scope else "?"
                action = match.group(1) if match else "?"
                self.call = (service, action)
                if proxy.decide(service, action):
                    text = EC2_THROTTLING_BODY if service == "ec2" else THROTTLING_BODY
                    self._reply(400, text.encode(), "text/xml")
                    return
                code = proxy.refuse(service, action)
                if code is not None:
                    proxy.refused[f"{service}:{action}"] += 1
                    body = error_body(service, code, f"kccm fault proxy refuses {action}")
                    self._reply(403, body.encode(), "text/xml")
                    return
                conn = http.client.HTTPConnection(
                    target.hostname or "127.0.0.1", target.port, timeout=60
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = target.netloc
                conn.request("POST", self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                conn.close()
                self._reply(reply.status, data, reply.getheader("Content-Type") or "text/xml")

            def _reply(self, status: int, data: bytes, content_type: str) -> None:
                if proxy.ledger is not None:
                    key = _ACCESS_KEY.search(self.headers.get("Authorization", ""))
                    proxy.ledger.append(
                        ProxyCall(
                            self.arrived,
                            time.time(),
                            key.group(1) if key else "?",
                            *self.call,
                            status,
                        )
                    )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _ProxyServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def every_nth(
    n: int, services: tuple[str, ...] = ("ec2", "elasticloadbalancing")
) -> Callable[[str, str, int], bool]:
    """Throttle every ``n``-th request of the given services."""
    return lambda service, action, seq: service in services and seq % n == 0
