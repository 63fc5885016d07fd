"""Service annotations and ``[LoadBalancerClass]`` sections: a value OCCM fails on too fails
the Service with an error naming the annotation and nothing is written (values OCCM ignores:
test_lb_annotation_parsing.py); classes choose the floating and
VIP subnets; ``lb-provider = ovn`` drops what OVN cannot do; the status follows the
hostname, proxy-protocol and ``enable-ingress-hostname`` settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service

from kccm.cloudprovider import LoadBalancerIngress
from kccm.providers.openstack.loadbalancer.annotations import LBAnnotationError
from kccm.providers.openstack.loadbalancer.floatingsubnets import FloatingSubnetSpec, tag_list
from kccm.providers.openstack.loadbalancer.names import cluster_name_of, cut255, load_balancer_name
from kccm.providers.openstack.loadbalancer.svcconf import parse_cidr_sloppy


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


BAD = [
    # id, annotations, spec, the text the error must contain
    (
        "proxy-and-xff",
        {ann.PROXY_PROTOCOL: "true", ann.X_FORWARDED_FOR: "true"},
        {},
        ann.X_FORWARDED_FOR,
    ),
    # a new balancer's pools would be made (on a pool that exists: test_lb_method_unknown.py)
    ("lb-method-unknown-new-pool", {ann.LB_METHOD: "RANDOM"}, {}, ann.LB_METHOD),
    ("class-unknown", {ann.CLASS: "nope"}, {}, "invalid loadbalancer class 'nope'"),
    (
        "source-ranges-bad",
        {},
        {"loadBalancerSourceRanges": ["10.0.0.0/33"]},
        "loadBalancerSourceRanges",
    ),
    (
        "source-ranges-annotation-bad",
        {ann.SOURCE_RANGES: "10.0.0.1/8,bogus"},
        {},
        ann.SOURCE_RANGES,
    ),
    (
        "source-ranges-bare-ip",  # OCCM: ParseCIDRSloppy refuses it (kccm read it as /32)
        {ann.SOURCE_RANGES: "10.0.0.1"},
        {},
        ann.SOURCE_RANGES,
    ),
    ("subnet-regexp-bad", {ann.FLOATING_SUBNET: "~(("}, {}, "invalid subnet regexp"),
]


@pytest.mark.parametrize(
    ("annotations", "spec", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_annotation_names_itself_and_writes_nothing(
    world: LBWorld, annotations: dict[str, str], spec: dict[str, Any], text: str
) -> None:
    balancers = world.balancers()
    svc = service(annotations=annotations, **spec)
    before = world.seq()
    with pytest.raises(LBAnnotationError) as raised:
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert text in str(raised.value)
    assert world.writes(before) == []
    assert world.patcher.patches == []
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_class_chooses_subnets(world: LBWorld) -> None:
    ids = world.ids
    balancers = world.balancers(
        sections={
            'LoadBalancerClass "office"': {
                "floating-subnet-id": ids["public_subnet_id"],
                "subnet-id": ids["private_subnet_id"],
            },
        },
        **{"floating-network-id": ids["public_network_id"]},
    )
    svc = service(annotations={ann.CLASS: "office"})
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    lb = world.lb_named(svc)
    assert lb["vip_subnet_id"] == ids["private_subnet_id"]
    fip = balancers.neutron.floating_ip_of_port(lb["vip_port_id"])
    assert fip is not None
    assert fip["floating_network_id"] == ids["public_network_id"]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_ovn_provider(world: LBWorld) -> None:
    """ovn: no timeouts, no allowed_cidrs, no HTTP monitor (TCP on the traffic port)."""
    balancers = world.balancers(
        **{"lb-provider": "ovn", "lb-method": "SOURCE_IP_PORT", "create-monitor": "true"}
    )
    svc = service(
        externalTrafficPolicy="Local",
        healthCheckNodePort=32200,
        loadBalancerSourceRanges=["10.9.0.0/16"],
    )
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    lb = world.lb_named(svc)
    assert lb["provider"] == "ovn"
    (listener,) = balancers.octavia.listeners(lb["id"])
    assert not listener.get("allowed_cidrs")
    (pool,) = balancers.octavia.pools(lb["id"])
    assert pool["lb_algorithm"] == "SOURCE_IP_PORT"
    assert balancers.octavia.health_monitor(pool["healthmonitor_id"])["type"] == "TCP"
    assert [m.get("monitor_port") for m in balancers.octavia.members(pool["id"])] == [None]
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_local_policy_monitors_the_health_check_node_port(world: LBWorld) -> None:
    balancers = world.balancers(**{"create-monitor": "true"})
    svc = service(
        externalTrafficPolicy="Local",
        healthCheckNodePort=32201,
        loadBalancerSourceRanges=["10.9.0.0/16"],
    )
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    lb = world.lb_named(svc)
    (listener,) = balancers.octavia.listeners(lb["id"])
    assert listener["allowed_cidrs"] == ["10.9.0.0/16"]
    (pool,) = balancers.octavia.pools(lb["id"])
    monitor = balancers.octavia.health_monitor(pool["healthmonitor_id"])
    assert (
        monitor["type"],
        monitor["url_path"],
        monitor["http_method"],
        monitor["expected_codes"],
    ) == ("HTTP", "/healthz", "GET", "200")
    assert [m["monitor_port"] for m in balancers.octavia.members(pool["id"])] == [32201]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


STATUSES = [
    # id, [LoadBalancer] keys, annotations, what the ingress looks like (ADDR = the address)
    ("vip-mode", {}, {}, {"ip": "ADDR", "ip_mode": "VIP"}),
    ("proxy-mode", {}, {ann.PROXY_PROTOCOL: "true"}, {"ip": "ADDR", "ip_mode": "Proxy"}),
    (
        "ingress-hostname",
        {"enable-ingress-hostname": "true", "ingress-hostname-suffix": "example.org"},
        {ann.PROXY_PROTOCOL: "v1"},
        {"hostname": "ADDR.example.org"},
    ),
    ("hostname", {}, {ann.HOSTNAME: "lb.example.com"}, {"hostname": "lb.example.com"}),
]


@pytest.mark.parametrize(
    ("lb", "annotations", "wanted"), [s[1:] for s in STATUSES], ids=[s[0] for s in STATUSES]
)
def test_status(
    world: LBWorld, lb: dict[str, str], annotations: dict[str, str], wanted: dict[str, str]
) -> None:
    balancers = world.balancers(**lb)
    svc = service(annotations=annotations)
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    address = world.patcher.patches[-1][ann.ADDRESS]
    expected = {k: v.replace("ADDR", address) for k, v in wanted.items()}
    assert status.ingress == (LoadBalancerIngress(**expected),)
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


# -- pure functions ---------------------------------------------------------------------------

NAMES = [
    ("plain", "kubernetes", "default", "web", "kube_service_kubernetes_default_web"),
    (
        "cut-to-255",
        "c" * 200,
        "ns",
        "n" * 100,
        ("kube_service_" + "c" * 200 + "_ns_" + "n" * 100)[:255],
    ),
]


@pytest.mark.parametrize(
    ("cluster", "ns", "name", "wanted"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES]
)
def test_load_balancer_name(cluster: str, ns: str, name: str, wanted: str) -> None:
    got = load_balancer_name(cluster, {"metadata": {"namespace": ns, "name": name}})
    assert got == wanted
    assert len(got) <= 255
    assert cut255(got) == got


@pytest.mark.parametrize(
    ("name", "prefix", "wanted"),
    [
        ("kube_service_kubernetes_default_web", "", "kubernetes"),
        ("listener_0_kube_service_old_ns_web", "listener_[0-9]+_", "old"),
        ("a1234", "", ""),
    ],
    ids=["lb", "listener", "not-ours"],
)
def test_cluster_name_of(name: str, prefix: str, wanted: str) -> None:
    assert cluster_name_of(name, prefix) == wanted


@pytest.mark.parametrize(
    ("tags", "params"),
    [
        ("a,b", {"tags-any": "a,b"}),
        ("&a,b", {"tags": "a,b"}),
        ("!a", {"not-tags": "a"}),
        ("!&a, b", {"not-tags-any": "a,b"}),
    ],
    ids=["any", "all", "none", "not-all"],
)
def test_floating_subnet_tags(tags: str, params: dict[str, str]) -> None:
    assert FloatingSubnetSpec(subnet_tags=tags).list_params("net") == {
        "network_id": "net",
        **params,
    }
    assert tag_list(tags)[0] == params[next(iter(params))].split(",")


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("public*", ["public-a", "public"]),
        ("!public*", ["other"]),
        ("~pub.*-a", ["public-a"]),
    ],
    ids=["glob", "negated", "regexp"],
)
def test_floating_subnet_names(pattern: str, names: list[str]) -> None:
    subnets = [{"name": n} for n in ("public-a", "public", "other")]
    assert [s["name"] for s in FloatingSubnetSpec(subnet=pattern).select(subnets)] == names


@pytest.mark.parametrize(
    ("internal", "wanted"),
    [("true", "annotation"), ("false", "class")],
    ids=["internal-annotation-wins", "external-class-wins"],
)
def test_vip_subnet_of_a_class_and_an_annotation(
    world: LBWorld, internal: str, wanted: str
) -> None:
    """Upstream ``createOctaviaLoadBalancer`` reads the class through
    ``svcConf.configClassName``, which ``checkService`` sets for external Services only."""
    ids = world.ids
    subnets = {"class": ids["private_subnet_id"], "annotation": ids["public_subnet_id"]}
    balancers = world.balancers(
        sections={'LoadBalancerClass "office"': {"subnet-id": subnets["class"]}},
        **{"floating-network-id": ids["public_network_id"]},
    )
    svc = service(
        annotations={
            ann.CLASS: "office",
            ann.SUBNET_ID: subnets["annotation"],
            ann.INTERNAL: internal,
        }
    )
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert world.lb_named(svc)["vip_subnet_id"] == subnets[wanted]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


GLOBS = [
    # id, pattern, names it matches among GLOB_NAMES (upstream glob.Globexp + regexpNameMatcher)
    ("alternatives", "public-{a,b}", ["public-a", "public-b"]),
    ("negated-alternatives", "!public-{a,b}", ["public-c", "public", "public/x", "", "a.b", "{x}"]),
    ("star-stops-at-slash", "public*", ["public-a", "public-b", "public-c", "public"]),
    ("question-mark", "publi?", ["public"]),
    ("class", "public-[ab]", ["public-a", "public-b"]),
    ("dot-is-literal", "a.b", ["a.b"]),
    ("double-brace-is-literal", "{{x}", ["{x}"]),
    ("comma-outside-a-group", "public-a,public-b", []),
    ("trailing-slash-star-star", "public/**", ["public/x"]),
]
GLOB_NAMES = ["public-a", "public-b", "public-c", "public", "public/x", "", "a.b", "{x}"]


@pytest.mark.parametrize(("pattern", "names"), [g[1:] for g in GLOBS], ids=[g[0] for g in GLOBS])
def test_floating_subnet_globs_as_godo(pattern: str, names: list[str]) -> None:
    """kccm difference: a subnet without a name matches only a pattern that matches ``""``
    (upstream's ``FindString(name) == name`` is true for it whatever the pattern)."""
    subnets = [{"name": n} for n in GLOB_NAMES]
    assert [s["name"] for s in FloatingSubnetSpec(subnet=pattern).select(subnets)] == names


def test_a_glob_go_cannot_compile_is_refused() -> None:
    with pytest.raises(LBAnnotationError, match=r"invalid subnet glob pattern 'public-\{a'"):
        FloatingSubnetSpec(subnet="public-{a").validate()


CIDRS = [
    # id, text, the network netutils.ParseCIDRSloppy gives (None: an error)
    ("network", "10.0.0.0/8", "10.0.0.0/8"),
    ("host-bits-dropped", "10.1.2.3/8", "10.0.0.0/8"),
    ("leading-zeros-are-decimal", "010.001.002.000/24", "10.1.2.0/24"),
    ("prefix-leading-zero", "10.0.0.0/08", "10.0.0.0/8"),
    ("ipv6", "fd00::1/64", "fd00::/64"),
    ("bare-ipv4", "10.0.0.1", None),
    ("bare-ipv6", "fd00::1", None),
    ("netmask", "10.0.0.0/255.0.0.0", None),
    ("prefix-too-long", "10.0.0.0/33", None),
    ("prefix-signed", "10.0.0.0/+8", None),
    ("prefix-empty", "10.0.0.0/", None),
    ("octet-too-big", "10.0.0.256/32", None),
    ("ipv6-zone", "fe80::1%eth0/64", None),
]


@pytest.mark.parametrize(("text", "wanted"), [c[1:] for c in CIDRS], ids=[c[0] for c in CIDRS])
def test_source_ranges_parse_as_parse_cidr_sloppy(text: str, wanted: str | None) -> None:
    if wanted is None:
        with pytest.raises(ValueError, match="invalid CIDR address"):
            parse_cidr_sloppy(text)
    else:
        assert str(parse_cidr_sloppy(text)) == wanted
