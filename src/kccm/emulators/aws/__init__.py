"""AWS's emulator: moto's server in a process of its own, taught by kccm where moto 5 answers
unlike AWS (:mod:`~kccm.emulators.aws.teachings`, applied in that process), with a request
log and per-call faults (:mod:`~kccm.emulators.aws.launcher`); a cluster's VPC world in it
(:mod:`~kccm.emulators.aws.world`), read-backs of what the provider wrote
(:mod:`~kccm.emulators.aws.readback`), the leak check (:mod:`~kccm.emulators.aws.leaks`) and
a throttling proxy in front of it (:mod:`~kccm.emulators.aws.proxy`).

Importing this package imports boto3 but not moto: moto runs in the emulator's process only.
"""

from kccm.emulators.aws.clients import CREDENTIALS, REGION, ZONES, client, clients, shared_loader
from kccm.emulators.aws.launcher import (
    MotoEmulator,
    MotoError,
    html_500,
    moto_emulator,
    reset_moto,
    start_moto,
    topology_fault,
)
from kccm.emulators.aws.leaks import made_by_kccm, no_leaked_balancers
from kccm.emulators.aws.proxy import FaultProxy, ProxyCall, error_body, every_nth
from kccm.emulators.aws.topology import network_nodes_of
from kccm.emulators.aws.world import (
    GONE_MEANWHILE,
    World,
    add_instances,
    build_world,
    cluster_tag,
    leftovers,
    node_for,
    provider_id_of,
    read_while_changing,
)

__all__ = [
    "CREDENTIALS",
    "GONE_MEANWHILE",
    "REGION",
    "ZONES",
    "FaultProxy",
    "MotoEmulator",
    "MotoError",
    "ProxyCall",
    "World",
    "add_instances",
    "build_world",
    "client",
    "clients",
    "cluster_tag",
    "error_body",
    "every_nth",
    "html_500",
    "leftovers",
    "made_by_kccm",
    "moto_emulator",
    "network_nodes_of",
    "no_leaked_balancers",
    "node_for",
    "provider_id_of",
    "read_while_changing",
    "reset_moto",
    "shared_loader",
    "start_moto",
    "topology_fault",
]
