"""Cheap checks of the control-plane kit that need no binaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from kccm.testing import controlplane
from kccm.testing.certs import CertificateAuthority

REPO = Path(__file__).resolve().parents[3]


def test_pinned_versions_match_the_build_script() -> None:
    pins = dict(
        line.split("=", 1)
        for line in (REPO / "hack/controlplane/versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["KUBERNETES_VERSION"] == controlplane.KUBERNETES_VERSION
    assert pins["ETCD_VERSION"] == controlplane.ETCD_VERSION


def test_missing_binaries_say_how_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCCM_CONTROL_PLANE_BIN", str(tmp_path))
    with pytest.raises(controlplane.ControlPlaneError, match="make controlplane"):
        controlplane.find_binaries()


def test_client_certificate_carries_user_and_groups() -> None:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    pair = CertificateAuthority().client("alice", ("devs", "ops"))
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["devs", "ops"]
