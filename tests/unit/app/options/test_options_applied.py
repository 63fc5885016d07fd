"""Flag groups: the built config (apply_to), one table over every group."""

from __future__ import annotations

from typing import Any

import pytest
from options_support import (
    BASE,
    _config,
)

# -- apply_to: one table over every group --------------------------------------------------------

APPLIED: list[tuple[str, list[str], str, Any]] = [
    ("cloud-config", ["--cloud-config=/dev/null"], "cloud_config", "/dev/null"),
    ("master", ["--master=https://x"], "master", "https://x"),
    (
        "sa-credentials",
        ["--use-service-account-credentials"],
        "use_service_account_credentials",
        True,
    ),
    ("qps", ["--kube-api-qps=5.5"], "kube_api_qps", 5.5),
    ("burst", ["--kube-api-burst=7"], "kube_api_burst", 7),
    (
        "metadata-refresh",
        ["--node-metadata-refresh-period=0"],
        "controller_options.node.node_metadata_refresh_period",
        0,
    ),
    (
        "protobuf-means-json",
        ["--kube-api-content-type=application/vnd.kubernetes.protobuf"],
        "kube_api_content_type",
        "application/json",
    ),
    ("cluster-name", ["--cluster-name=c1"], "cluster_name", "c1"),
    ("allocate", ["--allocate-node-cidrs"], "allocate_node_cidrs", True),
    (
        "routes-off",
        ["--configure-cloud-routes=false"],
        "controller_options.route.configure_cloud_routes",
        False,
    ),
    (
        "route-period",
        ["--route-reconciliation-period=1m"],
        "controller_options.route.route_reconciliation_period",
        60.0,
    ),
    (
        "monitor",
        ["--node-monitor-period=1s"],
        "controller_options.node_lifecycle.node_monitor_period",
        1.0,
    ),
    (
        "status",
        ["--node-status-update-frequency=1m"],
        "controller_options.node.node_status_update_frequency",
        60.0,
    ),
    (
        "node-syncs",
        ["--concurrent-node-syncs=3"],
        "controller_options.node.concurrent_node_syncs",
        3,
    ),
    (
        "status-updates",
        ["--concurrent-node-status-updates=2"],
        "controller_options.node.concurrent_node_status_updates",
        2,
    ),
    (
        "service-syncs",
        ["--concurrent-service-syncs=4"],
        "controller_options.service.concurrent_service_syncs",
        4,
    ),
    ("grace", ["--shutdown-grace-period=5s"], "shutdown_grace", 5.0),
    ("gates", ["--feature-gates=AllAlpha=true"], "feature_gates", {"AllAlpha": True}),
    ("le-off", ["--leader-elect=false"], "leader_election.enabled", False),
    ("le-lease", ["--leader-elect-lease-duration=30s"], "leader_election.lease_duration", 30.0),
    ("le-renew", ["--leader-elect-renew-deadline=5s"], "leader_election.renew_deadline", 5.0),
    ("le-retry", ["--leader-elect-retry-period=1s"], "leader_election.retry_period", 1.0),
    ("le-name", ["--leader-elect-resource-name=x"], "leader_election.resource_name", "x"),
    ("le-ns", ["--leader-elect-resource-namespace=y"], "leader_election.resource_namespace", "y"),
    ("bind", ["--bind-address=127.0.0.1"], "serving.bind_address", "127.0.0.1"),
    ("port", ["--secure-port=0"], "serving.secure_port", 0),
    ("cert-dir", ["--cert-dir=/tmp"], "serving.cert_dir", "/tmp"),
    (
        "cert",
        ["--tls-cert-file=/dev/null", "--tls-private-key-file=/dev/null"],
        "serving.tls_cert_file",
        "/dev/null",
    ),
    (
        "authn",
        ["--authentication-kubeconfig=/dev/null"],
        "serving.authentication_kubeconfig",
        "/dev/null",
    ),
    ("skip-lookup", ["--authentication-skip-lookup"], "serving.authentication_skip_lookup", True),
    (
        "authz",
        ["--authorization-kubeconfig=/dev/null"],
        "serving.authorization_kubeconfig",
        "/dev/null",
    ),
    (
        "allow-paths",
        ["--authorization-always-allow-paths=/a,/b"],
        "serving.always_allow_paths",
        ("/a", "/b"),
    ),
    ("verbosity", ["-v=3"], "logging.verbosity", 3),
    ("json", ["--logging-format=json"], "logging.format", "json"),
    ("gate-qps", ["--cloud-call-qps=2.5"], "gate.qps", 2.5),
    ("gate-burst", ["--cloud-call-burst=4"], "gate.burst", 4),
    (
        "gate-groups",
        ["--cloud-call-group-qps=load_balancer=5,instances=20"],
        "gate.group_qps",
        {"load_balancer": 5.0, "instances": 20.0},
    ),
    ("threads", ["--provider-threads=4"], "gate.provider_threads", 4),
]


@pytest.mark.parametrize(
    ("args", "path", "value"), [c[1:] for c in APPLIED], ids=[c[0] for c in APPLIED]
)
def test_flags_reach_the_config(args: list[str], path: str, value: Any) -> None:
    target: Any = _config([*BASE, *args])
    for part in path.split("."):
        target = getattr(target, part)
    assert target == value
