"""What kccm teaches moto in the emulator's process: answers moto 5 gives unlike AWS, made as
AWS gives them, and a speed-up of its request dispatch. Each teaching patches moto once per
process and names what moto does instead; :func:`teach_moto` applies them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from moto import backends as moto_backends
from moto.elb import exceptions as elb_exceptions
from moto.elb import models as elb_models

from kccm.emulators.aws.topology import teach_instance_topology

__all__ = [
    "delete_listeners_by_port",
    "keep_listener_instance_protocol",
    "list_moto_modules_once",
    "teach_moto",
]


def teach_moto() -> None:
    """Every teaching below and :func:`~kccm.emulators.aws.topology.teach_instance_topology`."""
    keep_listener_instance_protocol()
    delete_listeners_by_port()
    teach_instance_topology()
    list_moto_modules_once()


def keep_listener_instance_protocol() -> None:
    """moto 5 forgets a Classic ELB listener's ``InstanceProtocol`` and reports the front-end
    ``Protocol`` in its place; AWS keeps the one sent (an ``SSL`` listener to ``TCP`` back ends,
    upstream's ``buildListener`` for ``ssl-cert`` without ``backend-protocol``, reads back as
    ``SSL``/``TCP``). Taught here so that the tests see listeners as AWS reports them, and
    kccm's listener comparison (upstream ``elbListenersAreEqual``) is checked against that."""
    listener_class: Any = elb_models.FakeListener
    backend: Any = elb_models.ELBBackend
    if getattr(backend, "_kccm_keeps_instance_protocol", False):
        return

    def kept(listeners: list[Any], ports: list[dict[str, Any]]) -> None:
        sent = {
            str(p.get("LoadBalancerPort")): str(p["InstanceProtocol"]).upper()
            for p in ports
            if p.get("InstanceProtocol")
        }
        for listener in listeners:
            if str(listener.load_balancer_port) in sent:
                listener.kept_instance_protocol = sent[str(listener.load_balancer_port)]

    create, add = backend.create_load_balancer, backend.create_load_balancer_listeners

    def create_load_balancer(
        self: Any, name: str, zones: Any, ports: Any, *a: Any, **k: Any
    ) -> Any:
        balancer = create(self, name, zones, ports, *a, **k)
        kept(balancer.listeners, ports)
        return balancer

    def create_load_balancer_listeners(self: Any, name: str, ports: Any) -> Any:
        balancer = add(self, name, ports)
        if balancer is not None:
            kept(balancer.listeners, ports)
        return balancer

    listener_class.instance_protocol = property(
        lambda self: getattr(self, "kept_instance_protocol", None) or self.protocol
    )
    backend.create_load_balancer = create_load_balancer
    backend.create_load_balancer_listeners = create_load_balancer_listeners
    backend._kccm_keeps_instance_protocol = True


def delete_listeners_by_port() -> None:
    """moto 5's ``DeleteLoadBalancerListeners`` walks the balancer's listeners once per port
    asked for and keeps each listener that differs from *that* port: two ports or more leave
    every listener in place (each kept by the other port's pass) and copy the others, so a
    Service that drops two ports ends with doubled listeners, and each ensure after that
    doubles them again. AWS removes exactly the listeners on the ports given (API reference,
    DeleteLoadBalancerListeners); upstream (``ensureLoadBalancer``, aws_loadbalancer.go) and
    kccm send every removed port in one call. Taught here so that the tests and the chaos
    bench see AWS's answer (issue 28: the partition run's stale balancer)."""
    backend: Any = elb_models.ELBBackend
    if getattr(backend, "_kccm_deletes_listeners_by_port", False):
        return

    def delete_load_balancer_listeners(self: Any, name: str, ports: list[Any]) -> Any:
        balancer = self.get_load_balancer(name)
        if balancer is None:  # moto: an AttributeError, a 500; AWS: LoadBalancerNotFound
            raise elb_exceptions.LoadBalancerNotFoundError(name)
        gone = {int(port) for port in ports}
        balancer.listeners = [
            listener
            for listener in balancer.listeners
            if int(listener.load_balancer_port) not in gone
        ]
        return balancer

    backend.delete_load_balancer_listeners = delete_load_balancer_listeners
    backend._kccm_deletes_listeners_by_port = True


def list_moto_modules_once() -> None:
    """moto's server lists its own package directory (a ``listdir`` and ~170 ``isdir``) for
    every request it dispatches, to learn whether the Host names a service; the listing is
    the installed package's, so it is taken once here."""
    listing: Any = moto_backends.list_of_moto_modules
    if getattr(listing, "_kccm_once", False):
        return
    modules = tuple(listing())

    def list_of_moto_modules() -> Iterator[str]:
        return iter(modules)

    list_of_moto_modules._kccm_once = True  # type: ignore[attr-defined]
    moto_backends.list_of_moto_modules = list_of_moto_modules
