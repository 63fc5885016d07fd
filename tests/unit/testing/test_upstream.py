"""kccm.testing.upstream's own logic: the version a go.mod requires, finding a binary, the
controller manager's command line, the skip-or-fail rule, and the processes (child Pythons
stand in for the Go binaries)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import pytest

from kccm.testing import upstream
from kccm.testing.controllers import eventually
from kccm.testing.pytest_plugin import REQUIRE_ENV, unavailable
from kccm.testing.upstream import UpstreamProcesses, UpstreamUnavailable, running_processes

GO_MOD = "module x\n\ngo 1.24\n\nrequire k8s.io/cloud-provider-openstack v1.36.0\n"


def test_required_version_reads_the_go_mod(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text(GO_MOD)
    assert upstream.required_version(go_mod, "k8s.io/cloud-provider-openstack") == "v1.36.0"
    with pytest.raises(RuntimeError, match=r"no require of sigs\.k8s\.io/cloud-provider-azure"):
        upstream.required_version(go_mod, "sigs.k8s.io/cloud-provider-azure")


def test_bin_cache_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCCM_CACHE_DIR", "/cache")
    assert upstream.bin_cache() == Path("/cache/bin")
    monkeypatch.delenv("KCCM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert upstream.bin_cache() == Path("/xdg/kccm/bin")


def test_built_says_how_to_build_a_missing_binary(tmp_path: Path) -> None:
    found = tmp_path / "ccm"
    with pytest.raises(UpstreamUnavailable, match=r"ccm not found at .* \(make it\)"):
        upstream.built(found, "make it")
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    assert upstream.built(found, "make it") == found


ROUTE_FLAGS = {
    "with-routes-allocating": (("service", "route"), True, "--allocate-node-cidrs=true"),
    "with-routes-not-allocating": (("route",), False, "--allocate-node-cidrs=false"),
    "without-routes": (("service",), True, None),
}


@pytest.mark.parametrize(
    ("controllers", "allocate", "flag"), ROUTE_FLAGS.values(), ids=list(ROUTE_FLAGS)
)
def test_ccm_argv_adds_route_flags_only_with_the_route_controller(
    controllers: tuple[str, ...], allocate: bool, flag: str | None
) -> None:
    argv = upstream.ccm_argv(
        Path("/bin/ccm"),
        "openstack",
        cloud_config=Path("/c.conf"),
        kubeconfig=Path("/k.yaml"),
        cert_dir=Path("/certs"),
        port=1234,
        controllers=controllers,
        allocate_node_cidrs=allocate,
        extra=("--extra",),
    )
    assert argv[:3] == ["/bin/ccm", "--cloud-provider=openstack", "--cloud-config=/c.conf"]
    assert "--secure-port=1234" in argv
    assert f"--controllers={','.join(controllers)}" in argv
    assert argv[-1] == "--extra"
    routes = [a for a in argv if a.startswith(("--allocate-node-cidrs", "--cluster-cidr"))]
    assert routes == ([] if flag is None else [flag, f"--cluster-cidr={upstream.CLUSTER_CIDR}"])


def test_without_proxies_drops_both_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy")
    monkeypatch.setenv("no_proxy", "x")
    env = upstream.without_proxies({"A": "1"}, HTTP_PROXY="http://imds")
    assert "HTTPS_PROXY" not in env
    assert "no_proxy" not in env
    assert (env["A"], env["HTTP_PROXY"]) == ("1", "http://imds")


@pytest.mark.parametrize(("required", "outcome"), [("1", "Failed"), ("", "Skipped")])
def test_unavailable_skips_or_fails(
    monkeypatch: pytest.MonkeyPatch, required: str, outcome: str
) -> None:
    monkeypatch.setenv(REQUIRE_ENV, required)
    with pytest.raises(BaseException, match=r"OCCM .*unavailable: not built") as caught:
        unavailable("OCCM", "not built")
    assert type(caught.value).__name__ == outcome


LOGS_THEN_WAITS = "print('E0 ready', flush=True)\nimport time\ntime.sleep(60)\n"
LOGS_THEN_EXITS = "print('E0 ready', flush=True)\n"
EXITS_SILENT = "raise SystemExit(3)\n"


async def test_processes_log_stop_and_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.contextmanager(running_processes)(UpstreamProcesses(tmp_path)) as processes:
        waits = processes.spawn("waits", [sys.executable, "-c", LOGS_THEN_WAITS])
        exits = processes.spawn("exits", [sys.executable, "-c", LOGS_THEN_EXITS], env={})
        silent = processes.spawn("silent", [sys.executable, "-c", EXITS_SILENT])
        assert await eventually(lambda: waits.logged("E0 ready"))
        await asyncio.to_thread(exits.proc.wait)
        assert await exits.logged("E0 ready")  # logged before the exit: found
        with pytest.raises(AssertionError, match=r"silent exited \(3\)"):
            await eventually(lambda: silent.logged("E0 ready"))
        waits.alive()
        assert (waits.log.name, exits.log.name) == ("waits-0.log", "exits-1.log")
    assert waits.proc.returncode == -15  # SIGTERM at the end of the block
    assert "--- waits-0.log (exit -15) ---\n...\nE0 ready" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="waits exited"):
        waits.alive()
