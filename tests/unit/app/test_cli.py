"""The ``kccm`` command: bad invocations exit 2 naming the flag, help, version, subcommands,
the manager hook, and docs/flags.md kept in step with the flag definitions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kccm.app import cli
from kccm.app.config import ConfigurationError, ManagerConfig

ROOT = Path(__file__).resolve().parents[3]
CIDR = "--cluster-cidr=10.0.0.0/16"
OK = ["--cloud-provider=fake", CIDR]
BAD_CLOUD_CONFIG = "[Global]\nzone = z1\nlatency = fast\nbogus = 1\n"


def _bad_cloud_config(tmp_path: Path) -> str:
    path = tmp_path / "cloud.conf"
    path.write_text(BAD_CLOUD_CONFIG)
    return str(path)


# (id, args, text the error output must contain, run as a real subprocess?)
BAD_INVOCATIONS: list[tuple[str, list[str], str, bool]] = [
    ("missing-provider", [CIDR], "--cloud-provider cannot be empty", True),
    (
        "unknown-provider",
        ["--cloud-provider=nope", CIDR],
        '--cloud-provider: unknown cloud provider "nope"',
        False,
    ),
    (
        "unknown-controller",
        [*OK, "--controllers=*,-foo"],
        '--controllers: "foo" is not in the list of known controllers',
        True,
    ),
    (
        "bad-duration-bare-number",
        [*OK, "--node-monitor-period=5"],
        'invalid argument "5" for "--node-monitor-period" flag: time: missing unit in duration "5"',
        False,
    ),
    (
        "bad-duration-unit",
        [*OK, "--route-reconciliation-period=1d"],
        '"--route-reconciliation-period" flag: time: unknown unit "d"',
        False,
    ),
    (
        "negative-period",
        [*OK, "--node-status-update-frequency=-5m"],
        "--node-status-update-frequency: must be greater than zero",
        False,
    ),
    (
        "bad-cidr",
        ["--cloud-provider=fake", "--cluster-cidr=10.0.0.0"],
        "--cluster-cidr: invalid --cluster-cidr",
        True,
    ),
    (
        "unreadable-cloud-config",
        [*OK, "--cloud-config=/nonexistent/cloud.conf"],
        "--cloud-config: couldn't open cloud provider configuration /nonexistent/cloud.conf",
        False,
    ),
    (
        "invalid-cloud-config",
        [*OK, "--secure-port=0", "--leader-elect=false", "--cloud-config={bad}"],
        'key "latency"',
        True,
    ),
    ("unknown-flag", [*OK, "--foo=bar"], "unknown flag: --foo", False),
    ("positional-args", [*OK, "x", "y"], '"kccm" does not take any arguments, got ["x" "y"]', True),
    (
        "bad-bool",
        [*OK, "--leader-elect=maybe"],
        'invalid argument "maybe" for "--leader-elect" flag',
        False,
    ),
    (
        "bad-int",
        [*OK, "-v=high"],
        'invalid argument "high" for "-v, --v" flag: strconv.ParseInt',
        False,
    ),
    (
        "lock-not-leases",
        [*OK, "--leader-elect-resource-lock=endpoints"],
        '--leader-elect-resource-lock: must be "leases"',
        False,
    ),
    (
        "lease-not-above-renew",
        [*OK, "--leader-elect-lease-duration=10s"],
        "--leader-elect-lease-duration: must be greater than --leader-elect-renew-deadline",
        False,
    ),
    (
        "renew-not-above-retry",
        [*OK, "--leader-elect-retry-period=9s"],
        "--leader-elect-renew-deadline: must be greater than 1.2 x --leader-elect-retry-period",
        False,
    ),
    (
        "bad-logging-format",
        [*OK, "--logging-format=xml"],
        '--logging-format: format "xml" is not registered',
        False,
    ),
    (
        "negative-concurrency",
        [*OK, "--concurrent-service-syncs=-1"],
        "--concurrent-service-syncs: must be greater than zero",
        False,
    ),
    (
        "port-out-of-range",
        [*OK, "--secure-port=70000"],
        "--secure-port: 70000 must be between 0 and 65535",
        False,
    ),
    (
        "cert-without-key",
        [*OK, "--tls-cert-file=/dev/null"],
        "--tls-cert-file and --tls-private-key-file must be given together",
        False,
    ),
    (
        "unknown-feature-gate",
        [*OK, "--feature-gates=Bogus=true"],
        "--feature-gates: unrecognized feature gate: Bogus",
        False,
    ),
    ("missing-value", [*OK, "--kubeconfig"], "flag needs an argument: --kubeconfig", False),
    (
        "leader-migration",
        [*OK, "--enable-leader-migration"],
        "--enable-leader-migration: kccm does not implement",
        False,
    ),
]


def _args(args: list[str], tmp_path: Path) -> list[str]:
    return [arg.replace("{bad}", _bad_cloud_config(tmp_path)) for arg in args]


@pytest.mark.parametrize(
    ("args", "needle"),
    [(row[1], row[2]) for row in BAD_INVOCATIONS if not row[3]],
    ids=[row[0] for row in BAD_INVOCATIONS if not row[3]],
)
def test_bad_invocation_exits_2_naming_the_flag(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(_args(args, tmp_path)) == 2
    captured = capsys.readouterr()
    assert needle in captured.err
    assert "Run 'kccm --help' for usage." in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("args", "needle"),
    [(row[1], row[2]) for row in BAD_INVOCATIONS if row[3]],
    ids=[row[0] for row in BAD_INVOCATIONS if row[3]],
)
def test_bad_invocation_as_a_real_process(args: list[str], needle: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kccm", *_args(args, tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr


def test_every_error_is_reported_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--controllers=foo", "--node-monitor-period=5", "--secure-port=-1", "x"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    for needle in (
        "--node-monitor-period",
        '"foo" is not in the list',
        "--secure-port",
        "does not take any arguments",
        "--cloud-provider cannot be empty",
    ):
        assert needle in err


# -- help, version, subcommands ------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h", "--help=true"])
def test_help_is_grouped_by_section(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([flag]) == 0
    out = capsys.readouterr().out
    sections = [
        "Generic flags:",
        "Cloud-node-controller flags:",
        "Service-lb-controller flags:",
        "Debugging flags:",
        "Secure serving flags:",
        "Authentication flags:",
        "Authorization flags:",
        "Misc flags:",
        "Logs flags:",
        "Cloud call gate flags:",
        "Global flags:",
    ]
    positions = [out.index(section) for section in sections]
    assert positions == sorted(positions)
    assert "--leader-elect-lease-duration duration" in out
    assert "(default 5m0s)" in out
    assert "-v, --v Level" in out


def test_help_wins_over_other_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bogus", "-h"]) == 0
    assert "Usage:" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--version"], ["--version=true"], ["-v=2", "--version"]])
def test_version(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("kccm v")
    assert "cloud-controller-manager compatible" in out


def test_version_as_a_real_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kccm", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == cli.version_line()


def test_dev_subcommand_dispatches_before_flag_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    import kccm.devtools.devup

    seen: list[list[str]] = []

    def fake_dev_up(args: list[str]) -> int:
        seen.append(list(args))
        return 0

    monkeypatch.setattr(kccm.devtools.devup, "run_dev_up", fake_dev_up)
    assert cli.main(["dev", "up", "--check"]) == 0
    assert seen == [["--check"]]


@pytest.mark.parametrize(
    ("args", "code", "stream"),
    [
        pytest.param(["dev"], 2, "err", id="no-subcommand-is-a-usage-error"),
        pytest.param(["dev", "nope"], 2, "err", id="unknown-subcommand-is-a-usage-error"),
        pytest.param(["dev", "--help"], 0, "out", id="help-is-not-an-error"),
        pytest.param(["dev", "-h"], 0, "out", id="short-help-is-not-an-error"),
    ],
)
def test_dev_usage(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, stream: str
) -> None:
    assert cli.main(args) == code
    captured = capsys.readouterr()
    text = captured.out if stream == "out" else captured.err
    assert "usage: kccm dev up" in text
    assert "demo    the local provider end to end" in text


@pytest.mark.parametrize(
    "phrase",
    [
        pytest.param("etcd, kube-apiserver and kube-controller-manager", id="the-processes"),
        pytest.param("--cloud-provider=external", id="kcm-leaves-cloud-loops-to-kccm"),
        pytest.param("namespace `kubectl delete namespace` completes", id="namespace"),
        pytest.param("garbage collector ownerReferences are followed", id="gc"),
        pytest.param("node lifecycle a Node whose kubelet stops renewing", id="node-lifecycle"),
        pytest.param("service accounts the default ServiceAccount", id="service-accounts"),
        pytest.param("no kubelets, no scheduler and no cloud loops", id="what-is-missing"),
        pytest.param("kccm --cloud-provider=<name> --kubeconfig=<path>", id="daemon-command"),
        pytest.param("`make demo` (`kccm dev demo`) runs the local provider", id="make-demo"),
        pytest.param("--no-controller-manager", id="opt-out"),
    ],
)
def test_dev_up_help_says_what_the_dev_cluster_contains(
    capsys: pytest.CaptureFixture[str], phrase: str
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["dev", "up", "--help"])
    assert info.value.code == 0
    assert phrase in " ".join(capsys.readouterr().out.split())


def test_development_md_describes_make_demo_as_it_is() -> None:
    text = (ROOT / "DEVELOPMENT.md").read_text()
    assert "show it healthy, stop it" not in text
    assert "make demo          # the local provider end to end" in text


# -- the manager hook ----------------------------------------------------------------------------


def test_a_valid_command_line_runs_the_manager_with_the_config() -> None:
    seen: list[ManagerConfig] = []

    def manager(config: ManagerConfig) -> int:
        seen.append(config)
        return 0

    assert cli.run_ccm([*OK, "--controllers=service", "-v=3"], run_manager=manager) == 0
    assert seen[0].controllers == {"service-lb-controller"}
    assert seen[0].logging.verbosity == 3


def test_a_configuration_error_from_the_manager_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def manager(config: ManagerConfig) -> int:
        raise ConfigurationError(["--cloud-config: section Global: key zone: bad"])

    assert cli.run_ccm(OK, run_manager=manager) == 2
    assert "Error: --cloud-config: section Global: key zone: bad" in capsys.readouterr().err


def test_a_missing_manager_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "kccm.app.manager", None)
    assert cli.run_ccm(OK) == 1
    assert "the kccm manager is not available" in capsys.readouterr().err


# -- docs/flags.md -------------------------------------------------------------------------------


def test_flags_doc_is_current() -> None:
    current = (ROOT / "docs" / "flags.md").read_text()
    assert current == cli.flags_markdown(), "docs/flags.md is stale: run `make flags-doc`"


def test_flags_doc_lists_every_flag() -> None:
    from kccm.app.options import KccmOptions

    text = cli.flags_markdown()
    for name in KccmOptions().flag_set().flags:
        assert f"`--{name}`" in text
