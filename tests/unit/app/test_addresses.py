"""``kccm addresses list|release`` through the provider, and what ``kccm explain`` says about a
Service's address on release (docs/behaviour.md, "Keeping a balancer's address")."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from kccm.app.addresses_cli import run_addresses
from kccm.app.explain_rules import address_retention
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS, retention_of
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import LocalStore


def svc(annotation: str | None = None) -> dict[str, Any]:
    annotations = {} if annotation is None else {ANNOTATION_RETAIN_ADDRESS: annotation}
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}],
        },
    }


RETENTION = {
    "nothing-set": (None, False, False, "default"),
    "flag": (None, True, True, "flag --default-retain-address"),
    "annotation-true": ("true", False, True, f"annotation {ANNOTATION_RETAIN_ADDRESS}"),
    "annotation-false-beats-flag": (
        "false",
        True,
        False,
        f"annotation {ANNOTATION_RETAIN_ADDRESS}",
    ),
    "empty-annotation-is-unset": ("", True, True, "flag --default-retain-address"),
}


@pytest.mark.parametrize(
    ("annotation", "flag", "keep", "source"), RETENTION.values(), ids=RETENTION.keys()
)
def test_retention_of(annotation: str | None, flag: bool, keep: bool, source: str) -> None:
    retention = retention_of(svc(annotation), flag)
    assert (retention.keep, retention.source) == (keep, source)


EXPLAINED = {
    "released": (None, True, False, "released with the balancer"),
    "kept": ("true", True, True, "kept on release"),
    "unsupported": ("true", False, False, "provider fake cannot keep addresses"),
    "invalid": ("maybe", True, None, 'invalid value "maybe"'),
}


@pytest.mark.parametrize(
    ("annotation", "supported", "keep", "says"), EXPLAINED.values(), ids=EXPLAINED.keys()
)
def test_explain_says_what_happens_to_the_address(
    annotation: str | None, supported: bool, keep: bool | None, says: str
) -> None:
    answer = address_retention(svc(annotation), False, supported, "fake")
    assert answer["keep"] is keep
    assert says in answer["note"]


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return run_addresses(list(argv), out), out.getvalue()


def test_list_and_release_through_the_local_provider(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    config = tmp_path / "cloud.conf"
    config.write_text(f"[Global]\nstate-file = {state}\n")
    store = LocalStore(state)
    try:
        cloud = LocalCloud(store, load_local_config(io.StringIO("")))
        ip = cloud.ensure_load_balancer("kubernetes", svc(), []).ingress[0].ip
        cloud.ensure_load_balancer_deleted_keeping_address("kubernetes", svc())
        flags = ("--cloud-provider", "local", "--cloud-config", str(config))
        status, listed = run("list", *flags, "-o", "json")
        assert status == 0
        assert [(a["address"], a["owner"]) for a in json.loads(listed)] == [(ip, "ns/web")]
        assert run("release", ip, *flags) == (0, f"released {ip}\n")
        assert run("list", *flags, "-o", "json") == (0, "[]\n")
        assert run("release", ip, *flags)[0] == 1
        assert store.list_ip_claims() == []
    finally:
        store.close()


def test_a_provider_without_the_capability_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("list", "--cloud-provider", "fake")[0] == 1
    assert "does not implement address retention" in capsys.readouterr().err
