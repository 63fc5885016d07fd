"""``kccm explain service NAMESPACE/NAME | node NAME``: ask the leader kccm what it knows;
``kccm explain openstack-annotations [NAMESPACE]``: before switching from OCCM, what kccm would
read differently on the cluster's Services (:mod:`kccm.app.explain_preflight`, no kccm needed).

The leader is found through the Lease (``holderIdentity`` is ``<hostname>_<uuid>`` and a pod's
hostname is its name) and reached through the apiserver's pod proxy
(``/api/v1/namespaces/NS/pods/https:POD:PORT/proxy/debug/kccm/explain/...``) with the user's
kubeconfig credentials, or directly with ``--endpoint URL`` (then the user's credentials go
to kccm, whose delegated authorization asks the apiserver whether the user may ``get`` the
path). Arguments are parsed as cobra does: unknown sub-commands, flags and stray arguments are
refused by name with exit status 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from kccm.app.explain import EXPLAIN_PATH
from kccm.app.explain_preflight import (
    PREFLIGHT_KIND,
    PreflightError,
    ask_preflight,
    render_preflight,
)
from kccm.app.explain_rules import class_owners
from kccm.app.explain_text import render
from kccm.kube.client import KubeApiClient
from kccm.kube.config import ClusterConfig, KubeConfigError, load_cluster_config, with_endpoint
from kccm.kube.errors import ApiError, Forbidden, KubeError, NotFound, Unauthorized
from kccm.kube.resources import LEASES
from kccm.runtime.delegated import FORWARDED_TOKEN

__all__ = ["EXPLAIN_USAGE", "run_explain"]

EXIT_USAGE = 2
COMMAND = "kccm explain"
EXPLAIN_USAGE = """\
Explain what the leader kccm knows about a Service or a Node: who handles it, its last sync
and why it failed, the eligible nodes, the balancer as the cloud sees it, the call budget.

Usage:
  kccm explain service NAMESPACE/NAME [flags]
  kccm explain node NAME [flags]
  kccm explain openstack-annotations [NAMESPACE] [flags]
      before switching from OCCM v1.36.0: the LoadBalancer Services' annotations kccm reads
      differently (or that OCCM did not use either); needs only "list services", no kccm

Flags:
  -o, --output string                 text or json (default "text")
      --kubeconfig string             kubeconfig (default $KUBECONFIG, then ~/.kube/config)
      --endpoint string               ask this kccm URL directly (https://HOST:PORT) instead of
                                      the apiserver's pod proxy; your credentials go to it
      --certificate-authority string  CA bundle to verify --endpoint's serving certificate
      --insecure-skip-tls-verify      do not verify --endpoint's serving certificate
      --namespace string              the Lease's namespace (default "kube-system")
      --lease-name string             the Lease's name (default "cloud-controller-manager")
      --port int                      kccm's secure port in the pod (default 10258)
  -h, --help                          help for explain
"""
_VALUED = {
    "-o": "output",
    "--output": "output",
    "--kubeconfig": "kubeconfig",
    "--endpoint": "endpoint",
    "--certificate-authority": "ca_file",
    "--namespace": "namespace",
    "--lease-name": "lease_name",
    "--port": "port",
}
_BOOLS = {"--insecure-skip-tls-verify": "insecure", "-h": "help", "--help": "help"}
KINDS = ("service", "node", PREFLIGHT_KIND)


class UsageError(Exception):
    """Refused arguments (exit 2), worded as cobra words them."""


@dataclass
class ExplainArgs:
    kind: str = ""
    target: str = ""
    output: str = "text"
    kubeconfig: str = ""
    endpoint: str = ""
    ca_file: str = ""
    insecure: bool = False
    namespace: str = "kube-system"
    lease_name: str = "cloud-controller-manager"
    port: str = "10258"
    help: bool = False

    @property
    def path(self) -> str:
        return f"{EXPLAIN_PATH}/{self.kind}/{self.target}"


def _flag(args: ExplainArgs, token: str, rest: list[str]) -> None:
    name, eq, value = token.partition("=")
    if name.startswith("-o") and name not in ("-o", "--output") and not name.startswith("--"):
        name, eq, value = "-o", "=", name[2:]  # -ojson
    if name in _BOOLS:
        if eq and value not in ("true", "false"):
            raise UsageError(f'invalid argument "{value}" for "{name}" flag: not a bool')
        setattr(args, _BOOLS[name], value != "false")
        return
    if name not in _VALUED:
        raise UsageError(
            f"unknown flag: {name}"
            if name.startswith("--")
            else f"unknown shorthand flag: {name!r} in {token}"
        )
    if not eq:
        if not rest:
            raise UsageError(f"flag needs an argument: {name}")
        value = rest.pop(0)
    setattr(args, _VALUED[name], value)


def parse(argv: Sequence[str]) -> ExplainArgs:
    """Cobra's rules: flags anywhere, ``--`` ends them, exactly one sub-command and one name."""
    args, positional, rest = ExplainArgs(), [], list(argv)
    while rest:
        token = rest.pop(0)
        if token == "--":
            positional += rest
            break
        if token.startswith("-") and token != "-":
            _flag(args, token, rest)
        else:
            positional.append(token)
    if args.help:
        return args
    _check(args, positional)
    return args


def _check(args: ExplainArgs, positional: list[str]) -> None:
    if not positional:
        raise UsageError('"kccm explain" needs a sub-command: service NAMESPACE/NAME or node NAME')
    kind, names = positional[0], positional[1:]
    if kind not in KINDS:
        raise UsageError(f'unknown command "{kind}" for "{COMMAND}"')
    if kind == PREFLIGHT_KIND:
        if len(names) > 1:
            raise UsageError(f'"{COMMAND} {kind}" accepts at most 1 arg(s), received {len(names)}')
        names = names or [""]  # every namespace
    elif len(names) != 1:
        raise UsageError(f'"{COMMAND} {kind}" accepts 1 arg(s), received {len(names)}')
    target = names[0]
    if kind == "service" and (target.count("/") != 1 or "" in target.split("/")):
        raise UsageError(f'"{COMMAND} service" takes NAMESPACE/NAME, got "{target}"')
    if kind == "node" and (not target or "/" in target):
        raise UsageError(f'"{COMMAND} node" takes a Node NAME, got "{target}"')
    if args.output not in ("text", "json"):
        raise UsageError(f'--output must be text or json, got "{args.output}"')
    if not args.port.isdigit():
        raise UsageError(f'invalid argument "{args.port}" for "--port" flag')
    args.kind, args.target = kind, target


def _kubeconfig_path(flag: str) -> str | None:
    """As kubectl: the flag, else the first file of $KUBECONFIG, else ~/.kube/config."""
    if flag:
        return flag
    for entry in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry and Path(entry).is_file():
            return entry
    home = Path.home() / ".kube" / "config"
    return str(home) if home.is_file() else None


class ExplainError(Exception):
    """A failure the user can act on (exit 1)."""


def _config(args: ExplainArgs) -> ClusterConfig:
    try:
        config = load_cluster_config(_kubeconfig_path(args.kubeconfig))
    except KubeConfigError as exc:
        raise ExplainError(str(exc)) from exc
    if not args.endpoint:
        return config
    ca = str(Path(args.ca_file).resolve()) if args.ca_file else None
    return with_endpoint(config, args.endpoint.rstrip("/"), ca_file=ca, insecure=args.insecure)


@dataclass(frozen=True)
class _Leader:
    """The Lease's holder, reached through the pod named after its host name."""

    identity: str
    namespace: str

    @property
    def pod(self) -> str:
        return self.identity.rsplit("_", 1)[0]

    def not_a_pod(self) -> str:
        return (
            f"the leader {json.dumps(self.identity)} is not a pod in namespace {self.namespace} "
            f"(no pod {json.dumps(self.pod)}): kccm runs outside the cluster there (a systemd "
            "unit, `kccm dev up`), out of the pod proxy's reach; ask it directly with "
            "--endpoint https://HOST:PORT"
        )


async def _leader(kube: KubeApiClient, args: ExplainArgs) -> _Leader:
    where = f"{args.namespace}/{args.lease_name}"
    try:
        lease = await kube.get(LEASES, args.lease_name, namespace=args.namespace)
    except NotFound as exc:
        raise ExplainError(
            f"no Lease {where}: is kccm running with --leader-elect? (pass --namespace / "
            "--lease-name for another deployment, or --endpoint)"
        ) from exc
    except Forbidden as exc:
        raise ExplainError(f"cannot read the Lease {where}: {exc}") from exc
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if not holder:
        raise ExplainError(f"the Lease {where} has no holder: no kccm leads right now")
    return _Leader(holder, args.namespace)


def _forbidden(exc: ApiError, path: str, *, forwarded: bool = True) -> str:
    message = str((exc.status or {}).get("message") or exc)
    user = "system:anonymous" if "system:anonymous" in message else ""
    who = f"user {user}" if user else "you"
    if not user and "User " in message:
        who = "user " + message.split("User ", 1)[1].split(" ", 1)[0].strip('"')
    hint = "(grant the kccm-explain-reader ClusterRole)"
    if user and not forwarded:
        hint = (
            "(the apiserver's pod proxy does not pass your credentials on and your kubeconfig "
            "has no bearer token kccm could check: use --endpoint, e.g. through kubectl "
            "port-forward)"
        )
    return f"forbidden: {who} cannot get {path} {hint}"


async def _ask(args: ExplainArgs) -> dict[str, Any]:
    kube = KubeApiClient(_config(args), user_agent="kccm-explain")
    try:
        if args.endpoint:
            answer = await _get(kube, args.path, args.path)
        else:
            leader = await _leader(kube, args)
            base = f"/api/v1/namespaces/{args.namespace}/pods/https:{leader.pod}:{args.port}/proxy"
            token = await kube.bearer_token()
            headers = {FORWARDED_TOKEN: f"Bearer {token}"} if token else None
            answer = await _get(kube, base + args.path, args.path, headers, proxied=leader)
    finally:
        await kube.close()
    if answer.get("kind") == "service" and answer.get("handled") is False:
        await _add_class_owners(answer, args)
    return answer


async def _add_class_owners(answer: dict[str, Any], args: ExplainArgs) -> None:
    """Which kccm deployment serves the Service's class: every kccm writes what it serves on
    its own Lease (``kccm.io/load-balancer-classes``). Read from the apiserver with the
    user's own credentials; a user who may not list Leases is told so."""
    cls = answer.get("load_balancer_class")
    if cls is None:
        return
    kube = KubeApiClient(_config(replace(args, endpoint="")), user_agent="kccm-explain")
    try:
        leases = (await kube.list(LEASES, namespace=args.namespace)).items
    except KubeError as exc:
        answer["class_owners"] = {"error": f"cannot list Leases in {args.namespace}: {exc}"}
        return
    finally:
        await kube.close()
    answer["class_owners"] = class_owners(leases, str(cls), float(answer.get("now") or 0))


async def _get(
    kube: KubeApiClient,
    url_path: str,
    path: str,
    headers: dict[str, str] | None = None,
    *,
    proxied: _Leader | None = None,
) -> dict[str, Any]:
    try:
        return dict(await kube.get_raw(url_path, headers=headers))
    except Forbidden as exc:
        if proxied and "pods" in str((exc.status or {}).get("details") or {}):
            raise ExplainError(
                f"forbidden: you cannot get pods/proxy in the Lease's namespace to reach the "
                f"leader ({exc}); grant the kccm-explain-proxy Role, or use --endpoint"
            ) from exc
        raise ExplainError(_forbidden(exc, path, forwarded=headers is not None)) from exc
    except Unauthorized as exc:
        raise ExplainError(f"unauthorized: your credentials were refused for {path}") from exc
    except NotFound as exc:
        if proxied and (exc.status.get("details") or {}).get("kind") == "pods":
            raise ExplainError(proxied.not_a_pod()) from exc  # the apiserver's, not kccm's
        raise ExplainError(_not_found(exc)) from exc
    except KubeError as exc:
        raise ExplainError(f"the leader kccm is unreachable: {exc}") from exc


def _not_found(exc: NotFound) -> str:
    """kccm's own answer (``{"error": ...}``, which the client keeps as the message) or the
    apiserver's Status message."""
    message = str(exc.status.get("message") or exc)
    try:
        answer = json.loads(message)
    except ValueError:
        return message
    return str(answer.get("error") or message) if isinstance(answer, dict) else message


async def _answer(args: ExplainArgs) -> dict[str, Any]:
    if args.kind == PREFLIGHT_KIND:
        return await ask_preflight(_config(replace(args, endpoint="")), args.target)
    return await _ask(args)


def run_explain(
    argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = parse(argv)
    except UsageError as exc:
        print(f"Error: {exc}\nRun '{COMMAND} --help' for usage.", file=err)
        return EXIT_USAGE
    if args.help:
        print(EXPLAIN_USAGE, end="", file=out)
        return 0
    try:
        answer = asyncio.run(_answer(args))
    except (ExplainError, PreflightError) as exc:
        print(f"Error: {exc}", file=err)
        return 1
    if args.output == "json":
        print(json.dumps(answer, indent=2, sort_keys=True), file=out)
    elif args.kind == PREFLIGHT_KIND:
        print(render_preflight(answer), file=out)
    else:
        print(render(answer), file=out)
    return 0
