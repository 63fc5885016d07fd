"""Shared by the flag-group tests: the base command line, parse/config/errors helpers and
upstream's defaults table."""

from __future__ import annotations

from typing import Any

from kccm.app.config import ManagerConfig
from kccm.app.options import KccmOptions
from kccm.cloudprovider.registry import CloudProviderRegistry

CIDR = "10.0.0.0/16"
BASE = ["--cloud-provider=fake", f"--cluster-cidr={CIDR}"]


def _parse(args: list[str]) -> tuple[KccmOptions, list[str]]:
    options = KccmOptions()
    errors = options.flag_set().parse(args)
    return options, errors


def _config(args: list[str], registry: CloudProviderRegistry | None = None) -> ManagerConfig:
    options, errors = _parse(args)
    assert errors == []
    return options.config(registry) if registry else options.config()


def _errors(args: list[str], registry: CloudProviderRegistry | None = None) -> list[str]:
    options, errors = _parse(args)
    return errors + (options.validate(registry) if registry else options.validate())


H = 3600.0
# upstream options_test.go TestDefaultFlags / AddFlags (section 6.2 of the spec)
UPSTREAM_DEFAULTS: dict[str, Any] = {
    "cloud-provider": "",
    "cloud-config": "",
    "external-cloud-volume-plugin": "",
    "use-service-account-credentials": False,
    "allow-untagged-cloud": False,
    "route-reconciliation-period": 10.0,
    "node-monitor-period": 5.0,
    "cluster-name": "kubernetes",
    "cluster-cidr": "",
    "allocate-node-cidrs": False,
    "cidr-allocator-type": "RangeAllocator",
    "configure-cloud-routes": True,
    "node-sync-period": 0.0,
    "min-resync-period": 12 * H,
    "kube-api-content-type": "application/vnd.kubernetes.protobuf",
    "kube-api-qps": 20.0,
    "kube-api-burst": 30,
    "controller-start-interval": 0.0,
    "controllers": ["*"],
    "leader-elect": True,
    "leader-elect-lease-duration": 15.0,
    "leader-elect-renew-deadline": 10.0,
    "leader-elect-retry-period": 2.0,
    "leader-elect-resource-lock": "leases",
    "leader-elect-resource-name": "cloud-controller-manager",
    "leader-elect-resource-namespace": "kube-system",
    "feature-gates": {},
    "concurrent-node-syncs": 1,
    "concurrent-node-status-updates": 0,
    "concurrent-service-syncs": 1,
    "profiling": True,
    "contention-profiling": False,
    "enable-leader-migration": False,
    "leader-migration-config": "",
    "bind-address": "0.0.0.0",
    "secure-port": 10258,
    "cert-dir": "",
    "tls-cert-file": "",
    "tls-private-key-file": "",
    "authentication-kubeconfig": "",
    "authentication-skip-lookup": False,
    "authorization-kubeconfig": "",
    "authorization-always-allow-paths": ["/healthz", "/readyz", "/livez"],
    "webhooks": [],
    "webhook-bind-address": "0.0.0.0",
    "webhook-secure-port": 10260,
    "master": "",
    "kubeconfig": "",
    "node-status-update-frequency": 300.0,
    "v": 0,
    "logging-format": "text",
    "log-flush-frequency": 5.0,
    "version": False,
    "help": False,
    # k8s.io/apiserver v0.36.3 SecureServingOptions / DelegatingAuthenticationOptions /
    # DelegatingAuthorizationOptions, cloud-provider v0.36 WebhookServingOptions and
    # component-base v0.36.3 logs/api/v1 flags
    "tls-min-version": "",
    "tls-cipher-suites": [],
    "tls-curve-preferences": [],
    "tls-sni-cert-key": [],
    "http2-max-streams-per-connection": 0,
    "disable-http2-serving": False,
    "permit-port-sharing": False,
    "permit-address-sharing": False,
    "authentication-token-webhook-cache-ttl": 10.0,
    "authentication-tolerate-lookup-failure": False,
    "client-ca-file": "",
    "requestheader-client-ca-file": "",
    "requestheader-allowed-names": [],
    "requestheader-username-headers": ["x-remote-user"],
    "requestheader-uid-headers": [],
    "requestheader-group-headers": ["x-remote-group"],
    "requestheader-extra-headers-prefix": ["x-remote-extra-"],
    "authorization-webhook-cache-authorized-ttl": 10.0,
    "authorization-webhook-cache-unauthorized-ttl": 10.0,
    "webhook-cert-dir": "",
    "webhook-tls-cert-file": "",
    "webhook-tls-private-key-file": "",
    "webhook-tls-min-version": "",
    "webhook-tls-cipher-suites": [],
    "webhook-tls-curve-preferences": [],
    "webhook-tls-sni-cert-key": [],
    "webhook-disable-http2-serving": False,
    "vmodule": "",
    "log-text-split-stream": False,
    "log-text-info-buffer-size": "0",
    "log-json-split-stream": False,
    "log-json-info-buffer-size": "0",
}
# documented in docs/flags.md ("Differences from upstream")
KCCM_DIFFERENCES: dict[str, Any] = {
    "kube-api-qps": 1000.0,
    "kube-api-burst": 2000,
    "concurrent-node-syncs": 32,
    "concurrent-service-syncs": 10,
    "kube-api-content-type": "application/json",
}
KCCM_OWN: dict[str, Any] = {
    "shutdown-grace-period": 30.0,
    "cloud-call-qps": 0.0,
    "cloud-call-burst": 1,
    "cloud-call-group-qps": {},
    "provider-threads": 16,
    "node-metadata-refresh-period": 0.0,
    "reuse-unchanged-load-balancers": True,
    "load-balancer-class": [],
    "load-balancer-class-only": False,
    "default-retain-address": False,
    "default-drain-seconds": 0,
    "user-agent": [],
}
