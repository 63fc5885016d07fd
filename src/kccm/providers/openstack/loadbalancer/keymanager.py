"""The TLS container check of upstream ``checkService`` (``pkg/openstack/loadbalancer.go``
v1.36.0): before a balancer is ensured with ``default-tls-container-ref`` (the annotation, else
``[LoadBalancer] default-tls-container-ref``), the reference must name something in Barbican.

As upstream: without a ``key-manager`` endpoint in the catalog the Service is refused
("openstack keymanager client is not initialized"); with ``container-store = barbican`` the
reference's last two path segments give the kind (``containers`` or ``secrets``) and the
UUID, which is read from the catalog's key manager (``GET <endpoint>/v1/<kind>/<uuid>``, as
gophercloud's ``containers.Get``/``secrets.Get``), and a reference that is not found, or of
another kind, refuses the Service. ``container-store = external`` skips the read (Octavia
checks the reference itself); kccm then does not require the catalog entry either, as it
never calls it (upstream refuses the Service without one).

Only ensure checks: upstream's ``checkServiceUpdate`` and ``checkServiceDelete`` read the
reference without a check, so the members of a TLS listener follow the Nodes even when the
key manager is down, and the listener's container is left as it is.
"""

from __future__ import annotations

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.api import OpenStackAPI, OpenStackAuthError, OpenStackNotFound

__all__ = ["SERVICE", "KeyManager"]

SERVICE = "key-manager"
"""The catalog's service type of Barbican."""
_OPERATIONS = {"containers": "get_container", "secrets": "get_secret"}


class KeyManager:
    """Barbican as upstream's balancer code reads it: one GET per checked reference."""

    def __init__(self, api: OpenStackAPI, container_store: str) -> None:
        self.api = api
        self.container_store = container_store

    def _endpoint(self, ref: str) -> str:
        try:
            return self.api.endpoint(SERVICE)
        except OpenStackAuthError as err:
            raise CloudProviderError(
                "failed to create a TLS Terminated loadbalancer because openstack keymanager "
                f"client is not initialized and default-tls-container-ref {ref!r} is set "
                f"({err})"
            ) from err

    def check_ref(self, ref: str, service_key: str) -> None:
        """Refuse the Service when ``ref`` is set and (with the ``barbican`` store) Barbican
        has no container or secret by that reference (upstream ``checkService``)."""
        if not ref or self.container_store != "barbican":
            return
        endpoint = self._endpoint(ref)
        parts = ref.split("/")
        if len(parts) < 2:
            raise CloudProviderError(f"invalid tlsContainerRef for service {service_key}")
        kind, uuid = parts[-2], parts[-1]
        operation = _OPERATIONS.get(kind)
        if operation is None:
            raise CloudProviderError(
                f"failed to validate tlsContainerRef for service {service_key}: "
                f"tlsContainerRef type {kind} unknown"
            )
        noun = "container" if kind == "containers" else "secret"
        try:
            self.api.request(SERVICE, "GET", f"{endpoint}/v1/{kind}/{uuid}", operation=operation)
        except OpenStackNotFound as err:
            raise CloudProviderError(f"failed to get tls {noun} {ref!r}: {err}") from err
