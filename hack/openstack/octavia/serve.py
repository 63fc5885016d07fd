"""Run the real Octavia API (octavia 19 from PyPI) for tests: SQLite, noauth, no-op drivers.

Run with the venv that hack/openstack/octavia-api.sh installs:

    hack/openstack/octavia-api.sh serve --port PORT --state-dir DIR

It writes DIR/octavia.conf from octavia.conf beside this file, creates the schema in
DIR/octavia.sqlite, and serves Octavia's own WSGI application (octavia.api.app.setup_app, the
one octavia-api and uWSGI run) on 127.0.0.1:PORT with wsgiref, one request at a time, until
SIGTERM. It prints ``octavia-api ready on http://127.0.0.1:PORT`` once it answers.

Two paths of its own, outside Octavia's URL space, drive what a provider driver would do:

- ``POST /_kccm/settle``: every object in PENDING_CREATE or PENDING_UPDATE becomes ACTIVE;
  one in PENDING_DELETE becomes DELETED (a load balancer with all its children: the cascade);
  and every object gets the operating status a healthy amphora's heartbeat gives it (ONLINE;
  members without a monitor NO_MONITOR; disabled objects OFFLINE), which no API call sets.
  The statuses go through Octavia's driver-agent status updater
  (octavia.api.drivers.driver_agent.driver_updater.DriverUpdater.update_loadbalancer_status),
  the call a provider driver's agent makes, so rows are deleted and quotas released as they
  are in a deployment. Answers ``{"settled": {"loadbalancers": [ids], ...}}``.
- ``GET /_kccm/state``: the objects not DELETED, per kind, with their provisioning_status
  (a leak check: a test that cleaned up leaves ``{}`` in every kind).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any
from wsgiref import simple_server

HERE = Path(__file__).resolve().parent
KCCM_PREFIX = "/_kccm/"

# The driver-agent status keys, children before parents (DriverUpdater's own order).
KINDS = ("members", "healthmonitors", "pools", "l7rules", "l7policies", "listeners")


def write_config(port: int, state_dir: Path) -> Path:
    text = (HERE / "octavia.conf").read_text()
    text = text.replace("@PORT@", str(port)).replace("@STATE_DIR@", str(state_dir))
    conf = state_dir / "octavia.conf"
    conf.write_text(text)
    return conf


def create_schema() -> None:
    """The tables from Octavia's models plus the rows of its lookup tables, as Octavia's own
    functional tests set up SQLite (octavia/tests/functional/db/base.py)."""
    from octavia.common import constants
    from octavia.db import api as db_api
    from octavia.db import base_models, models

    engine = db_api.get_engine()
    base_models.BASE.metadata.create_all(engine)
    lookups = {
        models.ProvisioningStatus: constants.SUPPORTED_PROVISIONING_STATUSES,
        models.HealthMonitorType: constants.SUPPORTED_HEALTH_MONITOR_TYPES,
        models.Algorithm: constants.SUPPORTED_LB_ALGORITHMS,
        models.Protocol: constants.SUPPORTED_PROTOCOLS,
        models.OperatingStatus: constants.SUPPORTED_OPERATING_STATUSES,
        models.SessionPersistenceType: constants.SUPPORTED_SP_TYPES,
        models.AmphoraRoles: constants.SUPPORTED_AMPHORA_ROLES,
        models.LBTopology: constants.SUPPORTED_LB_TOPOLOGIES,
        models.VRRPAuthMethod: constants.SUPPORTED_VRRP_AUTH,
        models.L7RuleType: constants.SUPPORTED_L7RULE_TYPES,
        models.L7RuleCompareType: constants.SUPPORTED_L7RULE_COMPARE_TYPES,
        models.L7PolicyAction: constants.SUPPORTED_L7POLICY_ACTIONS,
        models.ClientAuthenticationMode: constants.SUPPORTED_CLIENT_AUTH_MODES,
    }
    session = db_api.get_session()
    with session.begin():
        for model, names in lookups.items():
            session.add_all(model(name=name) for name in names)
        nil, deleted = constants.NIL_UUID, "DELETED-PLACEHOLDER"
        session.add(
            models.FlavorProfile(
                id=nil, name=deleted, provider_name=constants.DELETED, flavor_data="{}"
            )
        )
        session.flush()
        session.add(models.Flavor(id=nil, flavor_profile_id=nil, name=deleted, enabled=False))
        session.add(
            models.AvailabilityZoneProfile(
                id=nil,
                name=deleted,
                provider_name=constants.DELETED,
                availability_zone_data="{}",
            )
        )
        session.flush()
        session.add(
            models.AvailabilityZone(availability_zone_profile_id=nil, name=nil, enabled=False)
        )


def _models() -> dict[str, Any]:
    from octavia.db import models

    return {
        "loadbalancers": models.LoadBalancer,
        "listeners": models.Listener,
        "pools": models.Pool,
        "members": models.Member,
        "healthmonitors": models.HealthMonitor,
        "l7policies": models.L7Policy,
        "l7rules": models.L7Rule,
    }


def _children(session: Any, lb_id: str) -> dict[str, list[str]]:
    """The ids of every object under a load balancer, per driver-agent key."""
    from octavia.db import models

    pools = [p.id for p in session.query(models.Pool).filter_by(load_balancer_id=lb_id)]
    listeners = [li.id for li in session.query(models.Listener).filter_by(load_balancer_id=lb_id)]
    policies = [
        p.id
        for p in session.query(models.L7Policy).filter(models.L7Policy.listener_id.in_(listeners))
    ]
    return {
        "members": [
            m.id for m in session.query(models.Member).filter(models.Member.pool_id.in_(pools))
        ],
        "healthmonitors": [
            h.id
            for h in session.query(models.HealthMonitor).filter(
                models.HealthMonitor.pool_id.in_(pools)
            )
        ],
        "pools": pools,
        "l7rules": [
            r.id
            for r in session.query(models.L7Rule).filter(models.L7Rule.l7policy_id.in_(policies))
        ],
        "l7policies": policies,
        "listeners": listeners,
    }


def _heartbeat(session: Any, records: dict[str, dict[str, dict[str, str]]]) -> None:
    """The operating statuses a healthy amphora's heartbeat makes the health manager write
    (octavia/amphorae/drivers/health/heartbeat_udp.py: balancer, listeners (OPEN) and pools
    (UP) ONLINE, OFFLINE when disabled; members UP -> ONLINE, "no check" (no monitor) ->
    NO_MONITOR, MAINT (disabled) -> OFFLINE) and the worker's MarkHealthMonitorActiveInDB
    (a monitor ONLINE, OFFLINE when disabled), for every balancer not being deleted; like the
    health manager, only a status that changes is written."""
    from octavia.db import models

    def put(kind: str, obj: Any, op: str) -> None:
        if op == obj.operating_status:  # the health manager writes changes only
            return
        record = records[kind].setdefault(obj.id, {"id": obj.id})
        if record.get("provisioning_status") != "DELETED":
            record["operating_status"] = op

    def up(obj: Any) -> str:
        return "ONLINE" if obj.enabled else "OFFLINE"

    lbs = session.query(models.LoadBalancer).filter(
        models.LoadBalancer.provisioning_status.notin_(("DELETED", "PENDING_DELETE"))
    )
    for lb in lbs:
        put("loadbalancers", lb, up(lb))
        for listener in lb.listeners:
            put("listeners", listener, up(listener))
        for pool in lb.pools:
            put("pools", pool, up(pool))
            monitor = pool.health_monitor
            if monitor is not None:
                put("healthmonitors", monitor, up(monitor))
            checked = monitor is not None and monitor.enabled
            for member in pool.members:
                op = up(member) if checked or not member.enabled else "NO_MONITOR"
                put("members", member, op)


def settle() -> dict[str, list[str]]:
    """Report every PENDING_* object ACTIVE, or DELETED, through the driver-agent updater,
    with the operating statuses of a healthy deployment (:func:`_heartbeat`)."""
    from octavia.api.drivers.driver_agent.driver_updater import DriverUpdater
    from octavia.db import api as db_api
    from octavia_lib.common import constants as lib_consts

    kinds = (*KINDS, "loadbalancers")
    records: dict[str, dict[str, dict[str, str]]] = {kind: {} for kind in kinds}
    settled: dict[str, list[str]] = {}

    def report(kind: str, obj_id: str, prov: str) -> None:
        records[kind][obj_id] = {"id": obj_id, "provisioning_status": prov}
        settled.setdefault(kind, []).append(obj_id)

    session = db_api.get_session()
    with session.begin():
        pending = {
            kind: list(session.query(model).filter(model.provisioning_status.like("PENDING_%")))
            for kind, model in _models().items()
        }
        for kind, objs in pending.items():
            for obj in objs:
                if obj.provisioning_status != "PENDING_DELETE":
                    report(kind, obj.id, "ACTIVE")
                elif kind != "loadbalancers":
                    report(kind, obj.id, "DELETED")
                else:  # a (cascade) delete: the driver removes everything under it
                    for child_kind, ids in _children(session, obj.id).items():
                        for child in ids:
                            report(child_kind, child, "DELETED")
                    report(kind, obj.id, "DELETED")
        _heartbeat(session, records)
    status = {kind: list(records[kind].values()) for kind in kinds}
    result = DriverUpdater().update_loadbalancer_status(status)
    if result.get(lib_consts.STATUS_CODE) != lib_consts.DRVR_STATUS_CODE_OK:
        raise RuntimeError(f"driver status update failed: {result}")
    return {kind: sorted(set(ids)) for kind, ids in settled.items()}


def state() -> dict[str, dict[str, str]]:
    """Every object not DELETED, per kind: {id: provisioning_status}."""
    from octavia.db import api as db_api

    session = db_api.get_session()
    with session.begin():
        return {
            kind: {
                obj.id: obj.provisioning_status
                for obj in session.query(model).filter(model.provisioning_status != "DELETED")
            }
            for kind, model in _models().items()
        }


def with_kccm_paths(app: Any) -> Any:
    """Octavia's WSGI app, with /_kccm/settle and /_kccm/state in front of it."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(KCCM_PREFIX):
            return app(environ, start_response)
        method = environ["REQUEST_METHOD"]
        if (method, path) == ("POST", KCCM_PREFIX + "settle"):
            body: Any = {"settled": settle()}
        elif (method, path) == ("GET", KCCM_PREFIX + "state"):
            body = state()
        else:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"unknown kccm path\n"]
        data = json.dumps(body).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]

    return wsgi


class QuietHandler(simple_server.WSGIRequestHandler):
    """wsgiref's handler without its per-request line on stderr (Octavia logs requests)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    state_dir = args.state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    conf = write_config(args.port, state_dir)

    from octavia.api import app as api_app
    from oslo_config import cfg

    app = api_app.setup_app(argv=["octavia-api", "--config-file", str(conf)])
    # SQLAlchemy 2 refuses pool_timeout with SQLite's pool (octavia's default is 10 s).
    cfg.CONF.set_override("pool_timeout", None, group="database")
    create_schema()

    server = simple_server.make_server(
        "127.0.0.1", args.port, with_kccm_paths(app), handler_class=QuietHandler
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"octavia-api ready on http://127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
