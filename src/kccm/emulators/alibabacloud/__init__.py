"""kccm's Alibaba Cloud emulator (issue 38): the RPC-style APIs upstream's
cloud-provider-alibaba-cloud v2.14.0 and kccm's ``alibabacloud`` provider call, on one port, and
the ECS instance metadata service beside them.

- :mod:`.rpc`: the RPC request (``Action`` and parameters in the query string or a form body,
  GET or POST), its signature checked (Alibaba's signature v1, HMAC-SHA1, keyed with
  ``<secret>&``, or v3, :mod:`.signature_v3`, the current SDKs' default), the product chosen by
  ``Version`` (ECS ``2014-05-26``, VPC ``2016-04-28``, SLB ``2014-05-15``, NLB ``2022-04-30``),
  JSON answers with a ``RequestId``, Alibaba's error shape (``Code``, ``Message``, ``RequestId``)
  with its HTTP status, faults and the request log;
- :mod:`.ecs`, :mod:`.vpc`, :mod:`.slb` (with :mod:`.slb_listeners`, :mod:`.slb_vgroups`): the
  actions (Node initialisation: instances and network interfaces; routes: route tables and
  entries; classic load balancers, their listeners, vServer groups and EIPs);
- :mod:`.nlb` (with :mod:`.nlb_listeners`, :mod:`.nlb_groups`, :mod:`.nlb_tags`, on
  :mod:`.nlbwire` and :mod:`.nlbmodel`): network load balancers with zone mappings, listeners,
  server groups and servers, tags, and the asynchronous jobs their writes start;
- :mod:`.metadata`: ``/latest/api/token`` (IMDSv2) and ``/latest/meta-data/...``;
- :mod:`.admin`: the ``/_emu`` test API (seeding, the request log, faults, the state a leak check
  compares); :mod:`.launcher` starts it as ``python -m kccm.emulators.alibabacloud``.

Not yet: access control lists as resources (a CLB listener keeps the ``AclId``/``AclStatus``/
``AclType`` it is sent) and NLB security policies.
"""

from __future__ import annotations

from kccm.emulators.alibabacloud.launcher import (
    AlibabaAdmin,
    AlibabaEmulator,
    AlibabaEmulatorError,
    alibaba_emulator,
    start_alibaba,
)

__all__ = [
    "AlibabaAdmin",
    "AlibabaEmulator",
    "AlibabaEmulatorError",
    "alibaba_emulator",
    "start_alibaba",
]
