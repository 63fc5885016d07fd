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
  kccm dev up [--check]      a development control plane (etcd + kube-apiserver)
  kccm local --help          the local provider's state: instances, load balancers, VIPs
"""
MARKDOWN_INTRO = """\
# kccm flags

<!-- Generated from the flag definitions in src/kccm/app/options.py by `make flags-doc`
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
- `--cluster-cidr` is checked up front: when the route controller is enabled and
  `--configure-cloud-routes=true` it must be set and valid (upstream fails the same way, but
  only once the provider is found to support routes). Providers without routes need
  `--configure-cloud-routes=false` or `--controllers=*,-route`.
- `--cloud-provider` is checked up front against the installed providers (or imported, for a
  `module:factory` reference); `--cloud-config` must be readable. When the provider's factory
  declares a cloud-config schema (a `config_schema` attribute holding its dataclass), the file
  is validated before anything starts; otherwise the factory validates it when the provider
  is built, and that failure also exits 2.
- `pv-label-controller` (alias `pv-label`) exists and is disabled by default.
- Leader-election timings are checked when `--leader-elect=true`: lease duration > renew
  deadline > 1.2 x retry period (upstream checks these when the elector is built).

## Accepted but ignored

Upstream flags that deployments commonly pass are accepted so that existing manifests work:

- `--profiling`, `--contention-profiling`: kccm serves no `/debug/pprof`.
- `--allow-untagged-cloud`: deprecated upstream; cluster tagging is the provider's business.
- `--external-cloud-volume-plugin`, `--cidr-allocator-type`: unused by the cloud controllers
  upstream too.
- `--node-sync-period`: a no-op upstream too.
- `--min-resync-period`: kccm's informers do not resync; each controller has its own periodic
  loop.
- `--controller-start-interval`: controllers start together.
- `--feature-gates`: parsed as a `k=v` list; unknown gates are rejected; no known gate changes
  kccm's behaviour.
- `--webhooks`, `--webhook-secure-port`, `--webhook-bind-address`: kccm has no webhooks; only
  `*` or an empty list is valid, and the port is range-checked.
- `--leader-migration-config`: only read with `--enable-leader-migration`, which kccm rejects
  (it does not implement leader migration; silently ignoring it could run two managers).
- `--log-flush-frequency`: kccm's log handler does not buffer.

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

    setup_logging(config.logging.verbosity, config.logging.format)


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


def _dev(args: list[str]) -> int:
    if args[:1] == ["up"]:
        from kccm.app.devup import run_dev_up

        return run_dev_up(args[1:])
    if args[:1] == ["demo"]:
        from kccm.app.demo import run_demo

        return run_demo(args[1:])
    print("usage: kccm dev up [--check] | kccm dev demo", file=sys.stderr)
    return EXIT_USAGE


def _local(args: list[str]) -> int:
    from kccm.app.local_cli import run_local

    return run_local(args)


SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {"dev": _dev, "local": _local}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    return run_ccm(args)
