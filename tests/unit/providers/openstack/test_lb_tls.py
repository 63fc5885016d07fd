"""TLS termination through Barbican (``default-tls-container-ref`` with the default
``container-store = barbican``), against the emulator's key manager: an ensure reads the
reference as upstream's ``checkService`` does (a container or a secret, by UUID, from the
catalog's key manager) and refuses one that is not there; an update never reads it, so the
members of a TLS listener keep following the Nodes even after the container is gone, and the
listener's container is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.api import OpenStackAPI, OpenStackAuthError
from kccm.providers.openstack.loadbalancer.keymanager import KeyManager


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


class Barbican:
    """What a user stores in Barbican before asking for TLS: a secret and a certificate
    container holding it (removed at the end)."""

    def __init__(self, api: OpenStackAPI) -> None:
        self.api = api
        self.secret_ref = self._post(
            "secrets",
            {"name": "web-cert", "payload": "PEM", "payload_content_type": "text/plain"},
        )["secret_ref"]
        self.container_ref = self._post(
            "containers",
            {
                "name": "web-tls",
                "type": "certificate",
                "secret_refs": [{"name": "certificate", "secret_ref": self.secret_ref}],
            },
        )["container_ref"]
        self.refs_left = [self.container_ref, self.secret_ref]

    def _post(self, kind: str, body: dict[str, Any]) -> Any:
        return self.api.request("key-manager", "POST", f"/v1/{kind}", json=body, operation="t")

    def remove(self) -> None:
        """Delete both (once)."""
        refs, self.refs_left = self.refs_left, []
        for ref in refs:
            self.api.request("key-manager", "DELETE", ref, operation="t")


@pytest.fixture
def barbican(world: LBWorld) -> Iterator[Barbican]:
    stored = Barbican(world.balancers().octavia.api)
    yield stored
    stored.remove()


def _tls(ref: str) -> dict[str, Any]:
    return service(annotations={ann.TLS_CONTAINER_REF: ref}, ports=((443, 30443),))


@pytest.mark.parametrize("kind", ["container_ref", "secret_ref"])
def test_a_stored_reference_makes_a_terminated_https_listener(
    world: LBWorld, barbican: Barbican, kind: str
) -> None:
    ref = getattr(barbican, kind)
    balancers = world.balancers()
    svc = _tls(ref)
    since = world.seq()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    reads = [r["path"] for r in world.emu.admin.requests(since) if r["service"] == "key-manager"]
    assert reads == [f"/key-manager/v1/{ref.split('/')[-2]}/{ref.split('/')[-1]}"]
    (listener,) = balancers.octavia.listeners(str(world.lb_named(svc)["id"]))
    assert (listener["protocol"], listener["default_tls_container_ref"]) == (
        "TERMINATED_HTTPS",
        ref,
    )
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


MISSING = [
    ("container-gone", "/v1/containers/0b3f2a7e-0000-4000-8000-000000000000", "tls container"),
    ("secret-gone", "/v1/secrets/0b3f2a7e-0000-4000-8000-000000000000", "tls secret"),
    ("unknown-kind", "/v1/orders/0b3f2a7e", "tlsContainerRef type orders unknown"),
    ("no-path", "container", "invalid tlsContainerRef for service default/web"),
]


@pytest.mark.parametrize(("path", "text"), [m[1:] for m in MISSING], ids=[m[0] for m in MISSING])
def test_a_reference_barbican_has_not_refuses_the_ensure(
    world: LBWorld, path: str, text: str
) -> None:
    balancers = world.balancers()
    ref = path if path == "container" else world.ids["base_url"] + "/key-manager" + path
    since = world.seq()
    with pytest.raises(CloudProviderError) as raised:
        balancers.ensure_load_balancer(CLUSTER, _tls(ref), world.nodes)
    assert text in str(raised.value)
    assert world.writes(since) == []


def test_external_store_reads_nothing(world: LBWorld) -> None:
    balancers = world.balancers(**{"container-store": "external"})
    svc = _tls("https://kms.example/v1/containers/abc")
    since = world.seq()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert [r for r in world.emu.admin.requests(since) if r["service"] == "key-manager"] == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_update_follows_the_nodes_without_reading_or_touching_the_container(
    world: LBWorld, barbican: Barbican
) -> None:
    balancers = world.balancers()
    svc = _tls(barbican.container_ref)
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes[:1])
    written = world.with_written(svc)
    barbican.remove()  # the key manager forgets it: an ensure would now be refused
    since = world.seq()
    balancers.update_load_balancer(CLUSTER, written, world.nodes)
    requests = world.emu.admin.requests(since)
    assert [r for r in requests if r["service"] == "key-manager"] == []
    assert [w for w in world.writes(since) if "/listeners" in w] == []
    assert any("/members" in w for w in world.writes(since))
    lb_id = str(world.lb_named(svc)["id"])
    (listener,) = balancers.octavia.listeners(lb_id)
    assert listener["default_tls_container_ref"] == barbican.container_ref
    with pytest.raises(CloudProviderError, match="failed to get tls container"):
        balancers.ensure_load_balancer(CLUSTER, written, world.nodes)
    balancers.ensure_load_balancer_deleted(CLUSTER, written)


class NoCatalogEntry:
    """An API whose catalog has no key manager."""

    def endpoint(self, service: str) -> str:
        raise OpenStackAuthError(f"openstack: no {service} endpoint")


def test_no_key_manager_in_the_catalog_refuses_a_barbican_reference() -> None:
    keymanager = KeyManager(NoCatalogEntry(), "barbican")  # type: ignore[arg-type]
    with pytest.raises(CloudProviderError, match="keymanager client is not initialized"):
        keymanager.check_ref("https://kms/v1/containers/x", "default/web")
    external = KeyManager(NoCatalogEntry(), "external")  # type: ignore[arg-type]
    external.check_ref("https://kms/v1/containers/x", "default/web")  # no catalog needed
