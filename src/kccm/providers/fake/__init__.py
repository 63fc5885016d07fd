"""``fake``: an in-memory cloud for tests and demos (like upstream ``cloud-provider/fake``).

It implements every interface of the contract with real state instead of fixed answers:

- instances (:meth:`FakeCloud.add_instance`) drive Instances, InstancesV2 and Zones; an
  unknown instance does not exist and lookups raise ``InstanceNotFound``; a providerID of
  another provider (``aws://...``) raises :class:`~kccm.cloudprovider.ForeignProviderID`,
  never "does not exist";
- load balancers are created by ``ensure_load_balancer`` (an address from 192.0.2.0/24 per
  balancer, stable across ensures), re-pointed by ``update_load_balancer`` and removed by
  ``ensure_load_balancer_deleted``; ``get_load_balancer`` reports what exists. Ensure and
  update are read-compare-write, as a real provider's should be: they read the balancer,
  compare it with what the Service, the nodes and the cloud config ask for, and change only
  what differs (a balancer changed or removed behind the provider's back, with
  :meth:`FakeCloud.alter_balancer` / :meth:`FakeCloud.remove_balancer`, is repaired);
- every request to the fake cloud is counted in a
  :class:`~kccm.cloudprovider.apicalls.CloudAPICalls` ledger (:meth:`FakeCloud.cloud_api_calls`):
  reads under the method's name, each state change under its own name
  (``create_load_balancer``, ``set_load_balancer_ports``, ``set_load_balancer_hosts``, ...);
- routes per cluster, named ``<cluster>-<name hint>-<cidr>``;
- ``describe_load_balancer`` shows each balancer port as a listener whose targets are its
  hosts on the node port, healthy unless shut down, gone, or set otherwise with
  :meth:`FakeCloud.set_target_health`; ``describe_instance`` shows a machine (both optional
  calls, for ``kccm explain``).

Every call is recorded in a bounded log (:attr:`FakeCloud.calls`), errors and latency can be
injected per method (:meth:`FakeCloud.fail`, :meth:`FakeCloud.fail_with` a kind of
:mod:`.faults`, :meth:`FakeCloud.set_latency`) or per Service (the ``fake.kccm.io/fail``
annotation), and all state
sits behind one lock, so the fake may be driven from several tasks and threads at once.
Latency sleeps go through the ``clock`` given to the constructor.
"""

from kccm.providers.fake.cloud import FakeCloud
from kccm.providers.fake.config import FakeCloudConfig, fake_cloud_from_config, new_fake_cloud
from kccm.providers.fake.faults import FAULT_ANNOTATION, FAULT_KINDS, fault
from kccm.providers.fake.model import (
    MAX_LATENCY,
    FakeBalancer,
    FakeCall,
    FakeCloudError,
    FakeInstance,
)

__all__ = [
    "FAULT_ANNOTATION",
    "FAULT_KINDS",
    "MAX_LATENCY",
    "FakeBalancer",
    "FakeCall",
    "FakeCloud",
    "FakeCloudConfig",
    "FakeCloudError",
    "FakeInstance",
    "fake_cloud_from_config",
    "fault",
    "new_fake_cloud",
]
