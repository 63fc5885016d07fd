"""kccm's OpenStack emulator: Keystone v3, Nova, Neutron, Octavia and Barbican's secrets and
containers on one aiohttp port, with Octavia's ``PENDING_*`` states and 409s, per-call
faults, a request log and leak checks.

Start it with :func:`openstack_emulator` (a subprocess ``python -m kccm.emulators.openstack
--port P``); steer it with :class:`EmulatorAdmin`. The server modules (``app``, ``keystone``,
``nova``, ``neutron``, ``neutron_l3``, ``octavia*``, ``barbican``, ``admin``, ``faults``) are
imported only by the server process.
"""

from kccm.emulators.openstack.launcher import (
    Emulator,
    EmulatorAdmin,
    EmulatorError,
    openstack_emulator,
    start_emulator,
)

__all__ = ["Emulator", "EmulatorAdmin", "EmulatorError", "openstack_emulator", "start_emulator"]
