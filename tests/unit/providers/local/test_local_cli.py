"""``kccm local ...``: instances, load balancers, VIP claims and routes from the state file."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kccm.app.cli import main
from kccm.providers.local.cli import run_local
from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord, LocalStore, RouteRecord


def run(state: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_local(["--state-file", str(state), *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def as_json(state: Path, *argv: str) -> Any:
    code, out, err = run(state, *argv, "-o", "json")
    assert (code, err) == (0, "")
    return json.loads(out)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


def test_instance_lifecycle_through_the_cli(state: Path) -> None:
    code, out, _ = run(
        state, "instances", "add", "n1", "--address", "InternalIP=127.0.10.1", "--zone", "z1"
    )
    assert (code, out) == (0, "instance local://n1 added (running)\n")
    assert run(state, "instances", "stop", "n1")[:2] == (0, "instance n1 stopped\n")
    (listed,) = as_json(state, "instances", "list")
    assert (listed["state"], listed["zone"], listed["addresses"]) == (
        "stopped",
        "z1",
        [{"type": "InternalIP", "address": "127.0.10.1"}],
    )
    assert run(state, "instances", "start", "n1")[:2] == (0, "instance n1 running\n")
    assert run(state, "instances", "delete", "n1")[:2] == (0, "instance n1 deleted\n")
    assert as_json(state, "instances", "list") == []


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param(("instances", "stop", "ghost"), 1, "no instance named 'ghost'", id="unknown"),
        pytest.param(("instances", "delete", "ghost"), 1, "no instance named", id="delete-unknown"),
        pytest.param(("instances", "add", "n0"), 1, "already exists", id="duplicate"),
        pytest.param(("instances", "add", "x", "--address", "bad"), 2, "TYPE=ADDRESS", id="addr"),
        pytest.param(("instances", "frob"), 2, "invalid choice", id="unknown-verb"),
        pytest.param(("lbs",), 2, "required", id="missing-verb"),
        pytest.param(("ips", "list", "-o", "yaml"), 2, "invalid choice", id="bad-output"),
    ],
)
def test_errors(state: Path, argv: tuple[str, ...], code: int, message: str) -> None:
    run(state, "instances", "add", "n0")
    got, out, err = run(state, *argv)
    assert (got, out) == (code, "")
    assert message in err


def test_a_future_state_file_is_a_runtime_error(state: Path) -> None:
    LocalStore(state).close()
    raw = sqlite3.connect(state)
    with raw:
        raw.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    raw.close()
    code, _, err = run(state, "instances", "list")
    assert code == 1
    assert "newer kccm" in err


def _seed(state: Path, dataplane_alive: bool = True) -> None:
    with LocalStore(state) as store:
        store.ensure_load_balancer(
            LoadBalancerRecord(
                name="aweb",
                service="ns/web",
                service_uid="web",
                vip="",
                ports=({"name": "http", "protocol": "TCP", "port": 80, "node_port": 30080},),
                backends=(
                    {"node": "n1", "address": "127.0.10.1"},
                    {"node": "n2", "address": "127.0.10.2"},
                ),
                health={"mode": "kube-proxy", "port": 10256, "path": "/healthz"},
            ),
            candidates=lambda: iter(["127.0.20.1"]),
            requested_ip=None,
            in_pool=lambda ip: True,
            retain=True,
        )
        store.put_route(RouteRecord("k-n1-10.244.1.0/24", "k", "n1", "10.244.1.0/24"))
        store._conn.execute("INSERT INTO backend_health VALUES ('aweb', 'n1', 1, 0, 'HTTP 200')")
        if dataplane_alive:  # this process stands in for a data plane that heartbeats
            store._conn.execute(
                "INSERT INTO dataplane VALUES (1, ?, ?)", (os.getpid(), time.time())
            )


@pytest.mark.parametrize(
    "heartbeat",
    [
        pytest.param(None, id="no-data-plane-ever"),
        pytest.param("dead-pid", id="its-process-died"),
        pytest.param("stale", id="heartbeat-older-than-5s"),
    ],
)
def test_lbs_shows_unknown_health_without_a_live_data_plane(
    state: Path, heartbeat: str | None
) -> None:
    _seed(state, dataplane_alive=False)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    rows = {
        None: None,
        "dead-pid": (int(dead.stdout), time.time()),
        "stale": (os.getpid(), time.time() - 60),
    }
    row = rows[heartbeat]
    if row is not None:
        with sqlite3.connect(state) as raw:
            raw.execute("INSERT INTO dataplane VALUES (1, ?, ?)", row)
        raw.close()
    (lb,) = as_json(state, "lbs", "list")
    assert [b["health"] for b in lb["backends"]] == ["unknown", "unknown"]


def test_lbs_ips_and_routes_tables(state: Path) -> None:
    _seed(state)
    code, out, _ = run(state, "lbs", "list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["SERVICE", "VIP", "PORTS"]
    assert row.split()[:5] == [
        "ns/web",
        "127.0.20.1",
        "80/TCP->30080",
        "n1=127.0.10.1(healthy),n2=127.0.10.2(unknown)",
        "kube-proxy:10256/healthz",
    ]
    ips = run(state, "ips", "list")[1].splitlines()
    assert ips[1].split()[:3] == ["127.0.20.1", "ns/web", "yes"]
    routes = run(state, "routes", "list")[1].splitlines()
    assert routes[1].split()[:3] == ["k", "n1", "10.244.1.0/24"]


def test_lbs_json_has_backend_health(state: Path) -> None:
    _seed(state)
    (lb,) = as_json(state, "lbs", "list")
    assert lb["vip"] == "127.0.20.1"
    assert [(b["node"], b["health"], b["detail"]) for b in lb["backends"]] == [
        ("n1", "healthy", "HTTP 200"),
        ("n2", "unknown", ""),
    ]
    assert as_json(state, "ips", "list")[0]["retain"] is True


def test_options_before_or_after_the_subcommand(state: Path) -> None:
    run(state, "instances", "add", "n1")
    out = io.StringIO()
    assert (
        run_local(["-o", "json", "--state-file", str(state), "instances", "list"], stdout=out) == 0
    )
    assert json.loads(out.getvalue())[0]["name"] == "n1"


def test_kccm_local_is_a_subcommand(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCCM_LOCAL_STATE", str(state))
    assert main(["local", "instances", "add", "via-env"]) == 0
    with LocalStore(state) as store:
        assert store.get_instance("via-env") == InstanceRecord(
            "via-env",
            created_at=store.get_instance("via-env").created_at,
            updated_at=store.get_instance("via-env").updated_at,
        )


def kccm(state: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KCCM_LOCAL_STATE": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "kccm", "local", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_real_command_adds_and_lists(state: Path) -> None:
    added = kccm(state, "instances", "add", "n1", "--address", "InternalIP=127.0.10.1")
    assert (added.returncode, added.stderr) == (0, "")
    listed = kccm(state, "instances", "list", "-o", "json")
    assert [i["provider_id"] for i in json.loads(listed.stdout)] == ["local://n1"]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        pytest.param(("instances", "stop", "ghost"), 1, id="runtime-error"),
        pytest.param(("instances",), 2, id="usage-error"),
    ],
)
def test_the_real_command_exit_status(state: Path, argv: tuple[str, ...], code: int) -> None:
    done = kccm(state, *argv)
    assert done.returncode == code
    assert done.stderr.startswith("error: ")


# -- issue 13: validation, release, help ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(("Bad_Name",), "'Bad_Name' is not a valid Node name", id="uppercase-name"),
        pytest.param(("n1-",), "'n1-' is not a valid Node name", id="dash-at-the-end"),
        pytest.param(("n" * 254,), "is not a valid Node name", id="name-too-long"),
        pytest.param(
            ("n1", "--address", "InternalIP=not-an-ip"),
            "'not-an-ip' is not an IP address",
            id="garbage-ip",
        ),
        pytest.param(
            ("n1", "--address", "InternalIP=127.0.10.300"),
            "'127.0.10.300' is not an IP address",
            id="octet-out-of-range",
        ),
        pytest.param(
            ("n1", "--address", "Internal=127.0.10.1"),
            "type 'Internal' is not one of InternalIP, ExternalIP, Hostname",
            id="unknown-type",
        ),
        pytest.param(
            ("n1", "--address", "Hostname=no spaces!"),
            "'no spaces!' is not a DNS name",
            id="bad-hostname",
        ),
        pytest.param(
            ("n1", "--address", "InternalIP=127.0.10.1", "--address", "InternalIP=127.0.10.1"),
            "--address InternalIP=127.0.10.1 given more than once",
            id="duplicate-address",
        ),
    ],
)
def test_instances_add_rejects_bad_input(state: Path, argv: tuple[str, ...], message: str) -> None:
    code, out, err = run(state, "instances", "add", *argv)
    assert (code, out) == (2, "")
    assert message in err
    assert not state.exists()  # nothing written, not even an empty file


def test_an_ip_belongs_to_one_instance(state: Path) -> None:
    assert run(state, "instances", "add", "n1", "--address", "InternalIP=127.0.10.1")[0] == 0
    code, _, err = run(state, "instances", "add", "n2", "--address", "ExternalIP=127.0.10.1")
    assert code == 1
    assert "address 127.0.10.1 already belongs to instance 'n1'" in err
    assert [i["name"] for i in as_json(state, "instances", "list")] == ["n1"]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("instances", "list"), id="instances-list"),
        pytest.param(("instances", "stop", "n1"), id="instances-stop"),
        pytest.param(("lbs", "list"), id="lbs-list"),
        pytest.param(("ips", "release", "127.0.20.1"), id="ips-release"),
        pytest.param(("routes", "list"), id="routes-list"),
    ],
)
def test_a_mistyped_state_file_is_reported_not_created(state: Path, argv: tuple[str, ...]) -> None:
    typo = state.with_name("stat.db")
    code, out, err = run(typo, *argv)
    assert (code, out) == (1, "")
    assert f"no state file at {typo}" in err
    assert not typo.exists()


def _retained(state: Path, *, in_use: bool) -> None:
    _seed(state)  # ns/web holds 127.0.20.1, retained
    if not in_use:
        with LocalStore(state) as store:
            store.delete_load_balancer("aweb", "ns/web", keep_claim=True)


@pytest.mark.parametrize(
    ("ip", "in_use", "code", "message"),
    [
        pytest.param("127.0.20.1", False, 0, "VIP 127.0.20.1 released (was claimed by ns/web)",
                     id="retained-claim-is-freed"),
        pytest.param("127.0.20.1", True, 1, "in use by the load balancer of ns/web",
                     id="claim-in-use-is-kept"),
        pytest.param("127.0.20.9", False, 1, "no VIP claim for '127.0.20.9'", id="unknown-ip"),
    ],
)  # fmt: skip
def test_ips_release(state: Path, ip: str, in_use: bool, code: int, message: str) -> None:
    _retained(state, in_use=in_use)
    got, out, err = run(state, "ips", "release", ip)
    assert got == code
    assert message in (out if code == 0 else err)
    claimed = [c["ip"] for c in as_json(state, "ips", "list")]
    assert claimed == ([] if code == 0 else ["127.0.20.1"])


def test_help_has_no_raw_markup(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_local(["--help"]) == 0
    text = capsys.readouterr().out
    assert "`" not in text
    assert "kccm local ips release IP" in text
