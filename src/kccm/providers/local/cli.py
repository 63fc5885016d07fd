"""``kccm local ...``: look at and change the local provider's state file.

See :data:`DESCRIPTION` for the commands (it is also the ``--help`` text).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from kccm.providers.local.dataplane.cli import main as run_dataplane
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import (
    BackendHealth,
    InstanceRecord,
    LoadBalancerRecord,
    LocalStore,
    StoreError,
    resolve_state_path,
)

__all__ = ["COMMANDS", "DESCRIPTION", "EXIT_ERROR", "EXIT_USAGE", "run_local"]

DESCRIPTION = """\
Look at and change the local provider's state file.

  kccm local instances add NAME --address InternalIP=127.0.10.1 [--type T] [--zone Z]
  kccm local instances stop|start|delete NAME
  kccm local instances list
  kccm local lbs list          VIP, ports, backends with their health (from the data plane)
  kccm local ips list          VIP claims (owner, retained)
  kccm local ips release IP    free a retained VIP claim nobody uses any more
  kccm local routes list
  kccm local dataplane ...     run the data plane in the foreground (see its --help)

--state-file PATH (else $KCCM_LOCAL_STATE, else the user's data directory) and
-o table|json go before or after the subcommand. Only "instances add" creates a missing
state file; every other command reports it missing. Exit status: 0; 1 for a runtime error
(unknown instance or IP, missing or unreadable state file); 2 for a usage error.
"""
NODE_ADDRESS_TYPES = ("InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

EXIT_ERROR = 1
EXIT_USAGE = 2
Rows = list[dict[str, Any]]
COMMANDS: dict[str, Callable[[list[str]], int]] = {"dataplane": run_dataplane}
"""Further ``kccm local <name> ...`` commands with their own argument parsing."""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # never returns
        raise _UsageError(f"{self.prog}: {message}")


def _common() -> _Parser:
    """Options accepted before and after the subcommand; defaults are applied after parsing
    (``set_defaults`` would change the shared actions and so override an earlier value)."""
    common = _Parser(add_help=False)
    common.add_argument("--state-file", default=argparse.SUPPRESS, help="SQLite state file")
    common.add_argument(
        "-o", "--output", choices=("table", "json"), default=argparse.SUPPRESS, help="format"
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(prog="kccm local", parents=[common], description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    groups = parser.add_subparsers(dest="group", required=True, parser_class=_Parser)
    instances = groups.add_parser("instances", help="local machines (Nodes)", parents=[common])
    verbs = instances.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    add = verbs.add_parser("add", help="add a running instance", parents=[common])
    add.add_argument("name")
    add.add_argument("--address", action="append", default=[], metavar="TYPE=ADDRESS",
                     help="e.g. InternalIP=127.0.10.1 (repeatable)")  # fmt: skip
    add.add_argument("--type", default="local.standard", help="instance type")
    add.add_argument("--zone", default="local-zone-a")
    add.add_argument("--region", default="local")
    for verb, text in (("stop", "shut down"), ("start", "start again"), ("delete", "delete")):
        verbs.add_parser(verb, help=f"{text} an instance", parents=[common]).add_argument("name")
    verbs.add_parser("list", help="list instances", parents=[common])
    for group, text in (("lbs", "load balancers"), ("ips", "VIP claims"), ("routes", "routes")):
        sub = groups.add_parser(group, help=text, parents=[common])
        actions = sub.add_subparsers(dest="verb", required=True, parser_class=_Parser)
        actions.add_parser("list", help=f"list {text}", parents=[common])
        if group == "ips":
            release = actions.add_parser(
                "release", help="free a VIP claim no load balancer uses", parents=[common]
            )
            release.add_argument("ip")
    return parser


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(list(argv))
    args.state_file = getattr(args, "state_file", None)
    args.output = getattr(args, "output", "table")
    return args


# -- rows ------------------------------------------------------------------------------------


def _ago(at: float) -> str:
    seconds = max(0, int(time.time() - at))
    if seconds < 120:
        return f"{seconds}s"
    return f"{seconds // 60}m" if seconds < 7200 else f"{seconds // 3600}h"


def _instance_row(instance: InstanceRecord) -> dict[str, Any]:
    return {
        "name": instance.name,
        "provider_id": instance.provider_id,
        "state": instance.state,
        "addresses": [{"type": t, "address": a} for t, a in instance.addresses],
        "instance_type": instance.instance_type,
        "zone": instance.zone,
        "region": instance.region,
        "created_at": instance.created_at,
        "updated_at": instance.updated_at,
    }


def _backend_rows(
    lb: LoadBalancerRecord, health: Mapping[tuple[str, str], BackendHealth]
) -> list[dict[str, Any]]:
    rows = []
    for backend in lb.backends:
        found = health.get((lb.name, str(backend["node"])))
        state = "unknown" if found is None else ("healthy" if found.healthy else "unhealthy")
        rows.append({**backend, "health": state, "detail": found.detail if found else ""})
    return rows


def _lb_row(
    lb: LoadBalancerRecord, health: Mapping[tuple[str, str], BackendHealth]
) -> dict[str, Any]:
    return {
        "service": lb.service,
        "name": lb.name,
        "vip": lb.vip,
        "ports": list(lb.ports),
        "backends": _backend_rows(lb, health),
        "health_check": dict(lb.health),
        "source_ranges": list(lb.source_ranges),
        "session_affinity": lb.session_affinity,
        "generation": lb.generation,
    }


# -- tables ----------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    for line in (headers, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip(),
              file=out)  # fmt: skip


def _print_instances(rows: Rows, out: TextIO) -> None:
    _table(
        ("NAME", "STATE", "ADDRESSES", "TYPE", "ZONE", "REGION", "PROVIDER ID"),
        [
            (
                r["name"],
                r["state"],
                ",".join(f"{a['type']}={a['address']}" for a in r["addresses"]) or "-",
                r["instance_type"],
                r["zone"],
                r["region"],
                r["provider_id"],
            )
            for r in rows
        ],
        out,
    )


def _ports_text(ports: Sequence[Mapping[str, Any]]) -> str:
    return ",".join(f"{p['port']}/{p['protocol']}->{p['node_port']}" for p in ports) or "-"


def _backends_text(backends: Sequence[Mapping[str, Any]]) -> str:
    return ",".join(f"{b['node']}={b['address']}({b['health']})" for b in backends) or "-"


def _print_lbs(rows: Rows, out: TextIO) -> None:
    _table(
        ("SERVICE", "VIP", "PORTS", "BACKENDS", "HEALTH CHECK", "AFFINITY", "GEN"),
        [
            (
                r["service"],
                r["vip"],
                _ports_text(r["ports"]),
                _backends_text(r["backends"]),
                _health_text(r["health_check"]),
                r["session_affinity"],
                str(r["generation"]),
            )
            for r in rows
        ],
        out,
    )


def _health_text(health: Mapping[str, Any]) -> str:
    if health.get("mode") == "tcp":
        return "tcp"
    return f"{health.get('mode')}:{health.get('port')}{health.get('path', '')}"


def _print_ips(rows: Rows, out: TextIO) -> None:
    _table(
        ("IP", "OWNER", "RETAINED", "AGE"),
        [
            (r["ip"], r["owner"], "yes" if r["retain"] else "no", _ago(r["claimed_at"]))
            for r in rows
        ],
        out,
    )


def _print_routes(rows: Rows, out: TextIO) -> None:
    _table(
        ("CLUSTER", "TARGET NODE", "DESTINATION", "BLACKHOLE", "NAME"),
        [
            (r["cluster"], r["target_node"], r["destination_cidr"], str(r["blackhole"]), r["name"])
            for r in rows
        ],
        out,
    )


# -- commands --------------------------------------------------------------------------------


def _usage(message: str) -> _UsageError:
    return _UsageError(f"kccm local instances add: {message}")


def _check_name(name: str) -> None:
    """A Node name: a DNS subdomain (RFC 1123), lowercase, at most 253 characters."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise _usage(
            f"{name!r} is not a valid Node name (lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)"
        )


def _parse_address(text: str) -> tuple[str, str]:
    kind, sep, address = (part.strip() for part in text.partition("="))
    if not sep or not kind or not address:
        raise _usage(f"--address {text!r} is not TYPE=ADDRESS")
    if kind not in NODE_ADDRESS_TYPES:
        raise _usage(
            f"--address {text!r}: type {kind!r} is not one of {', '.join(NODE_ADDRESS_TYPES)}"
        )
    if kind.endswith("IP"):
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError:
            raise _usage(f"--address {text!r}: {address!r} is not an IP address") from None
    elif len(address) > 253 or not _DNS_SUBDOMAIN.fullmatch(address.lower()):
        raise _usage(f"--address {text!r}: {address!r} is not a DNS name")
    return kind, address


def _addresses(texts: Sequence[str]) -> tuple[tuple[str, str], ...]:
    parsed = tuple(_parse_address(text) for text in texts)
    repeated = sorted({f"{k}={a}" for k, a in parsed if parsed.count((k, a)) > 1})
    if repeated:
        raise _usage(f"--address {', '.join(repeated)} given more than once")
    return parsed


def _check_unique_ips(store: LocalStore, name: str, addresses: Sequence[tuple[str, str]]) -> None:
    """An IP address belongs to one instance: two would make their backends ambiguous."""
    mine = {a for k, a in addresses if k.endswith("IP")}
    for other in store.list_instances():
        taken = mine & {a for k, a in other.addresses if k.endswith("IP")}
        if taken and other.name != name:
            raise StoreError(
                f"address {', '.join(sorted(taken))} already belongs to instance {other.name!r}"
            )


def _instances(store: LocalStore, args: argparse.Namespace) -> Rows | str:
    if args.verb == "list":
        return [_instance_row(i) for i in store.list_instances()]
    if args.verb == "add":
        addresses = args.parsed_addresses
        _check_unique_ips(store, args.name, addresses)
        record = InstanceRecord(
            args.name, addresses, instance_type=args.type, zone=args.zone, region=args.region
        )
        return f"instance {store.add_instance(record).provider_id} added (running)"
    if args.verb == "delete":
        store.delete_instance(args.name)
        return f"instance {args.name} deleted"
    instance = store.set_instance_state(args.name, running=args.verb == "start")
    return f"instance {instance.name} {instance.state}"


def _lbs(store: LocalStore) -> Rows:
    """Backends with their last verdict, or ``unknown`` when no data plane heartbeats (the
    verdicts of a dead data plane are stale)."""
    serving = live_dataplane(store.path) is not None
    found = store.list_backend_health() if serving else []
    health = {(h.load_balancer, h.node): h for h in found}
    return [_lb_row(lb, health) for lb in store.list_load_balancers()]


def _ips(store: LocalStore, args: argparse.Namespace) -> Rows | str:
    if args.verb == "release":
        return _release(store, args.ip)
    return [
        {"ip": c.ip, "owner": c.owner, "retain": c.retain, "claimed_at": c.claimed_at}
        for c in store.list_ip_claims()
    ]


def _release(store: LocalStore, ip: str) -> str:
    """Free a claim that no load balancer uses (typically a retained one)."""
    claims = {c.ip: c for c in store.list_ip_claims()}
    if ip not in claims:
        raise StoreError(f"no VIP claim for {ip!r} (see kccm local ips list)")
    users = [lb.service for lb in store.list_load_balancers() if lb.vip == ip]
    if users:
        raise StoreError(
            f"{ip} is in use by the load balancer of {users[0]}: delete that Service "
            "(without the retain-ip annotation) to free it"
        )
    store.release_ip(ip)
    return f"VIP {ip} released (was claimed by {claims[ip].owner})"


def _routes(store: LocalStore) -> Rows:
    return [
        {
            "name": r.name,
            "cluster": r.cluster,
            "target_node": r.target_node,
            "destination_cidr": r.destination_cidr,
            "blackhole": r.blackhole,
            "created_at": r.created_at,
        }
        for r in store.list_routes()
    ]


_PRINTERS: dict[str, Callable[[Rows, TextIO], None]] = {
    "instances": _print_instances,
    "lbs": _print_lbs,
    "ips": _print_ips,
    "routes": _print_routes,
}


def _execute(store: LocalStore, args: argparse.Namespace) -> Rows | str:
    if args.group == "instances":
        return _instances(store, args)
    if args.group == "ips":
        return _ips(store, args)
    listers: dict[str, Callable[[LocalStore], Rows]] = {"lbs": _lbs, "routes": _routes}
    return listers[args.group](store)


def _emit(result: Rows | str, args: argparse.Namespace, out: TextIO) -> None:
    if isinstance(result, str):
        if args.output == "json":
            print(json.dumps({"result": result}), file=out)
        else:
            print(result, file=out)
    elif args.output == "json":
        print(json.dumps(result, indent=2, sort_keys=True), file=out)
    else:
        _PRINTERS[args.group](result, out)


def run_local(
    argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """The ``kccm local`` command; returns the exit status."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](list(argv[1:]))
    try:
        args = _parse(argv)
        if (args.group, args.verb) == ("instances", "add"):  # before the file is touched
            _check_name(args.name)
            args.parsed_addresses = _addresses(args.address)
        path = resolve_state_path(args.state_file)
        if not path.exists() and (args.group, args.verb) != ("instances", "add"):
            raise StoreError(
                f"no state file at {path} (check --state-file or $KCCM_LOCAL_STATE; "
                "'kccm local instances add' creates one)"
            )
        with LocalStore(path) as store:
            result = _execute(store, args)
    except _UsageError as exc:
        print(f"error: {exc}\nRun 'kccm local --help' for usage.", file=err)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int | None) else EXIT_USAGE
    except (StoreError, OSError, sqlite3.Error) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_ERROR
    _emit(result, args, out)
    return 0
