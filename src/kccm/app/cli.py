"""The ``kccm`` command line.

``kccm dev ...`` (and later ``kccm local ...``) are subcommands, dispatched before any flag
parsing. Anything else is the cloud-controller-manager itself, with upstream's flags
(:mod:`kccm.app.options`): parse → validate (every error at once, exit 2) → run the manager.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from kccm import __version__
from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.flags import FlagSet, go_quote, render_help, render_markdown
from kccm.app.options import KccmOptions
from kccm.cloudprovider.registry import CloudProviderRegistry, default_registry

__all__ = [
    "EXIT_USAGE",
    "USAGE_HEADER",
    "flags_markdown",
    "main",
    "run_ccm",
    "version_line",
]

EXIT_USAGE = 2
COMMAND = "kccm"
USAGE_HEADER = """\
The Cloud controller manager is a daemon that embeds
the cloud specific control loops shipped with Kubernetes.
kccm is a Python implementation of k8s.io/cloud-provider's cloud-controller-manager
with the same flags (Go syntax: --flag=value, --bool=false, durations like 5m0s).

Usage:
  kccm [flags]
  kccm dev up [--check]      a dev cluster: etcd, kube-apiserver, kube-controller-manager
  kccm local --help          the local provider's state: instances, load balancers, VIPs
  kccm explain service NAMESPACE/NAME | node NAME   what the leader knows (why pending?)
  kccm explain openstack-annotations [NAMESPACE]    before leaving OCCM: annotations read otherwise
  kccm addresses list|release   addresses kept by address retention (through the provider)
"""
MARKDOWN_INTRO = """\
# kccm flags

<!-- Generated from the flag definitions in src/kccm/app/options/ by `make flags-doc`
     (python -m kccm --print-flags-markdown). Do not edit by hand: a test fails when stale. -->

`kccm` takes the flags of upstream's `cloud-controller-manager`, with the same names, syntax
and defaults, grouped in the same named sections. Go syntax applies: `--flag=value` or
`--flag value`; a bool flag never takes the next argument (`--leader-elect`,
`--leader-elect=false`); `-v=2`, `-v 2` and `--v=2` are the same; durations are Go durations
(`5m0s`, `1h30m`, `300ms`; a bare number is only accepted for `0`); list flags are
comma-separated and a repeated list flag appends; `_` in a flag name reads as `-`.
Every invalid flag is reported at once and the process exits with status 2.

## Differences from upstream

- `--concurrent-service-syncs` defaults to 10 (upstream 1) and `--concurrent-node-syncs` to 32
  (upstream 1): kccm's workers are coroutines and cloud calls are budgeted by the call gate.
- `--kube-api-content-type` accepts `application/json` and
  `application/vnd.kubernetes.protobuf`; kccm always speaks JSON, so the default is shown as
  `application/json` (upstream: protobuf).
- `--cluster-cidr` is checked as soon as the provider is built, before leader election: when
  the route controller is enabled, `--configure-cloud-routes=true` and the provider supports
  routes, it must be set and valid (upstream checks the same in the same order, but only when
  the route controller starts, after the lease is taken). A provider without routes needs no
  CIDR.
- `--kube-api-qps` / `--kube-api-burst` default to 1000 / 2000 (upstream 20 / 30): 20 qps caps
  node initialisation near 10 nodes/s. The apiserver's priority and fairness protects it, and
  kccm retries answers carrying Retry-After as client-go does.
- `--node-metadata-refresh-period` (kccm's own, opt-in; default `0s`): with `0` every
  initialised Node is re-read at start and at every `--node-status-update-frequency` tick, as
  upstream (a provider with `list_instance_metadata` answers a tick for all Nodes in one
  call). A longer period reads each Node at most once per period, the reads spread over it:
  fewer cloud calls for a provider without a list call, but a changed address (e.g. a new
  public IP after a stop/start) then takes up to that period to reach the Node.
- `--cloud-provider` is checked up front against the installed providers (or imported, for a
  `module:factory` reference); `--cloud-config` must be readable. When the provider's factory
  declares a cloud-config schema (a `config_schema` attribute holding its dataclass), the file
  is validated before anything starts; otherwise the factory validates it when the provider
  is built, and that failure also exits 2.
- `pv-label-controller` (alias `pv-label`) exists and is disabled by default.
- Leader-election timings are checked when `--leader-elect=true`: lease duration > renew
  deadline > 1.2 x retry period (upstream checks these when the elector is built).
- `--load-balancer-class` (kccm's own, repeatable; default none) and
  `--load-balancer-class-only`: without them kccm serves class-less LoadBalancer Services
  only, as upstream. With them it serves the named `spec.loadBalancerClass` values too (or
  only them), and writes what it serves on its own leader-election Lease (annotations
  `kccm.io/load-balancer-classes`, `kccm.io/load-balancer-class-less`) for `kccm explain`.
  docs/behaviour.md, "Serving a load-balancer class".

## Accepted but ignored

kccm accepts every flag of upstream's v0.36 `cloud-controller-manager`, so that existing
manifests start. The ones that cannot change kccm's behaviour are checked like upstream checks
them and then ignored; when one is set to something other than its default, kccm logs a
warning naming it and the reason at start:

- `--use-service-account-credentials=true`: not supported yet (it would need rights to
  create ServiceAccounts and tokens); kccm warns and every controller uses the main
  credentials, each with its own client and rate limiter.
- `--profiling`, `--contention-profiling`: kccm serves no `/debug/pprof`.
- `--external-cloud-volume-plugin`, `--cidr-allocator-type`: unused by the cloud controllers
  upstream too.
- `--node-sync-period`: a no-op upstream too.
- `--reuse-unchanged-load-balancers` (kccm's own, deprecated): it skipped the ensure of a
  load balancer whose spec hash (an annotation kccm kept on the Service) was unchanged. kccm
  now ensures every load balancer on start as upstream and the providers write only what
  differs from the cloud, so the flag means nothing any more; setting it logs a deprecation
  warning.
- `--min-resync-period`: kccm's informers do not resync; each controller has its own periodic
  loop.
- `--controller-start-interval`: controllers start together.
- `--feature-gates`: parsed as a `k=v` list; unknown gates are rejected; `LoggingAlphaOptions`
  unlocks the `--log-*-split-stream` flags as upstream; no gate changes anything else.
- `--webhooks` and the `--webhook-*` serving flags: kccm has no webhooks (upstream's
  `NewCloudControllerManagerCommand` serves none either); only `*` or an empty list is valid,
  and the port, files, TLS version, cipher suites and curve IDs are checked.
- `--leader-migration-config`: only read with `--enable-leader-migration`, which kccm rejects
  (it does not implement leader migration; silently ignoring it could run two managers).
- `--log-flush-frequency`, `--log-text-info-buffer-size`, `--log-json-info-buffer-size`:
  kccm's log handler does not buffer.
- `--tls-curve-preferences`: the curve IDs are checked; kccm uses OpenSSL's key-exchange
  group order (Python's `ssl` module cannot set a list).
- `--http2-max-streams-per-connection`, `--disable-http2-serving`: kccm serves HTTP/1.1 only.

## Secure serving, authentication and authorization

- `--tls-min-version` and `--tls-cipher-suites` (Go/IANA names, mapped to OpenSSL's) apply to
  the serving socket; as in Go, cipher suites only govern TLS 1.2 and older. A list that this
  OpenSSL cannot serve at all is rejected up front.
- `--tls-sni-cert-key` pairs are served by server name (exact name, then a `*.` wildcard of
  its parent; without names, the certificate's DNS names or CN); other clients get the
  default certificate.
- `--permit-port-sharing` sets `SO_REUSEPORT`; `SO_REUSEADDR` is always set on Unix (as Go).
- `--authorization-always-allow-paths` (default `/healthz,/readyz,/livez`): those paths skip
  authentication and authorization; every other path (`/metrics` included) needs a user the
  apiserver authorizes (SubjectAccessReview; `system:masters` always passes). An entry ending
  in `*` is a prefix; `/healthz` also covers kccm's per-check paths (`/healthz/<check>`),
  which upstream does not serve. kccm also skips authentication on those paths (upstream still
  answers 401 to a bad token there).
- Authenticators, in upstream's order: request headers (`--requestheader-client-ca-file`,
  `--requestheader-allowed-names`, `--requestheader-*-headers`), client certificates
  (`--client-ca-file`: user = CN, groups = O), bearer tokens (TokenReview, cached for
  `--authentication-token-webhook-cache-ttl`), else anonymous. Access reviews are cached for
  `--authorization-webhook-cache-authorized-ttl` / `-unauthorized-ttl`.
- CA bundles the flags leave empty are read once at start from the ConfigMap
  `kube-system/extension-apiserver-authentication` (upstream watches it) unless
  `--authentication-skip-lookup`; a failed lookup stops the start (exit 1) unless
  `--authentication-tolerate-lookup-failure`.
- Differences: a client certificate that no configured CA issued fails the TLS handshake
  (upstream answers 401); a client certificate must be issued directly by a CA of its bundle;
  without `--authentication-kubeconfig` / `--authorization-kubeconfig` the main client makes
  the reviews (upstream then treats every request as anonymous and forbids it).

## Connecting to the apiserver

`--kubeconfig` names the file; `--master` overrides its server (or stands alone). With
neither, kccm uses the in-cluster service account, like upstream (client-go's
`BuildConfigFromFlags`): `$KUBECONFIG` and `~/.kube/config` are not read. Outside a pod that
is an error naming the flag to pass (exit 2), as is a file that is not a kubeconfig. A
secure port that cannot be bound (in use, not a local address) ends the start with one line
and exit status 1.

kccm's own flags are `--shutdown-grace-period` and the cloud call gate section.
"""

RunManager = Callable[[ManagerConfig], int]


def version_line() -> str:
    return f"kccm v{__version__} (cloud-controller-manager compatible, k8s.io/cloud-provider)"


def _new_flags() -> tuple[KccmOptions, FlagSet]:
    options = KccmOptions()
    return options, options.flag_set(COMMAND)


def flags_markdown() -> str:
    """docs/flags.md, generated from the flag definitions."""
    _, fs = _new_flags()
    return render_markdown(fs, MARKDOWN_INTRO)


def _report(errors: list[str], stderr: TextIO) -> int:
    for error in errors:
        print(f"Error: {error}", file=stderr)
    print(f"Run '{COMMAND} --help' for usage.", file=stderr)
    return EXIT_USAGE


def _positional_error(args: list[str]) -> str:
    got = "[" + " ".join(go_quote(arg) for arg in args) + "]"
    return f"{go_quote(COMMAND)} does not take any arguments, got {got}"


def _load_run_manager(stderr: TextIO) -> RunManager | None:
    try:
        from kccm.app.manager import run_manager
    except ImportError as err:
        print(f"Error: the kccm manager is not available ({err})", file=stderr)
        return None
    return run_manager


def _setup_logging(config: ManagerConfig) -> None:
    from kccm.app.logs import setup_logging

    setup_logging(
        config.logging.verbosity,
        config.logging.format,
        vmodule=config.logging.vmodule,
        split_stream=config.logging.split_stream,
    )


def run_ccm(
    args: Sequence[str],
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    registry: CloudProviderRegistry = default_registry,
    run_manager: RunManager | None = None,
) -> int:
    """The cloud-controller-manager command: parse, validate, run."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    options, fs = _new_flags()
    if "--print-flags-markdown" in args:
        out.write(flags_markdown())
        return 0
    errors = fs.parse(args)
    if options.global_.help:
        print(render_help(fs, USAGE_HEADER), file=out)
        return 0
    if options.global_.version and not errors:
        print(version_line(), file=out)
        return 0
    if fs.args:
        errors.append(_positional_error(fs.args))
    try:
        config = options.config(registry)
    except ConfigurationError as exc:
        return _report(errors + exc.issues, err)
    if errors:
        return _report(errors, err)
    return _run(config, run_manager, err)


def _run(config: ManagerConfig, run_manager: RunManager | None, stderr: TextIO) -> int:
    runner = run_manager or _load_run_manager(stderr)
    if runner is None:
        return 1
    if run_manager is None:
        _setup_logging(config)
    try:
        return runner(config)
    except ConfigurationError as exc:
        return _report(exc.issues, stderr)


DEV_USAGE = """\
usage: kccm dev up [--check] [--no-controller-manager] | kccm dev demo

  up      a development cluster's control plane in the foreground: etcd, kube-apiserver
          and kube-controller-manager (--cloud-provider=external); --check starts it,
          shows it healthy and stops it (`kccm dev up --help` says what runs)
  demo    the local provider end to end (what `make demo` runs)
"""


def _dev(args: list[str]) -> int:
    if args[:1] == ["up"]:
        from kccm.devtools.devup import run_dev_up

        return run_dev_up(args[1:])
    if args[:1] == ["demo"]:
        from kccm.devtools.demo import run_demo

        return run_demo(args[1:])
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(DEV_USAGE, end="")
        return 0
    print(DEV_USAGE, end="", file=sys.stderr)
    return EXIT_USAGE


def _local(args: list[str]) -> int:
    from kccm.providers.local.cli import run_local

    return run_local(args)


def _addresses(args: list[str]) -> int:
    from kccm.app.addresses_cli import run_addresses

    return run_addresses(args)


def _explain(args: list[str]) -> int:
    from kccm.app.explain_cli import run_explain

    return run_explain(args)


SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "dev": _dev,
    "local": _local,
    "explain": _explain,
    "addresses": _addresses,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    return run_ccm(args)
