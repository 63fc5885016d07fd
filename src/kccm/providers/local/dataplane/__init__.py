"""The local provider's L4 data plane: a long-lived asyncio proxy driven by the state file.

Desired state is every row of ``load_balancers``. The data plane polls ``PRAGMA data_version``
every ``poll_interval`` (0.5 s) — one cheap pragma while nothing changes — and on a change
re-reads the rows, diffs the listeners by (vip, protocol, port) and applies only the
difference: unchanged listeners are not touched, a changed backend set or source range is
swapped in place (open connections keep flowing), removed listeners are closed, and a listener
that cannot bind is retried on the next poll.

Health: one probe per (load balancer, node) as cloud-provider-kind does (see
:mod:`.health`). A backend is *unknown* until its first check completes and unknown
counts as healthy, so a restarted data plane or a new backend serves at once; the first result
then decides, and afterwards ``fall`` failures mark it unhealthy and ``rise`` successes healthy.
Every verdict change is one ``backend_health`` write.

Process: ``kccm local dataplane --state-file PATH`` (or ``python -m
kccm.providers.local.dataplane_main``). It claims the single ``dataplane`` row (refusing to
start while another live process heartbeats there), heartbeats every second, and on SIGTERM
or SIGINT closes its listeners, drops its row and exits 0. :func:`ensure_dataplane_running`
starts one detached (its own session, stdout/stderr to ``dataplane.log`` beside the state
file) unless a live one heartbeats, so restarting the controller manager never drops traffic.

Modules: :mod:`.server` (the :class:`~.server.DataPlane` loop), :mod:`.model` (desired
listeners and probe targets from the rows), :mod:`.proxy` (TCP/UDP listeners), :mod:`.health`
(probes), :mod:`.store` (its rows in the state file), :mod:`.cli` (the command) and
:mod:`.supervise` (process supervision: start a detached one, find the live one). Nothing is
imported here, so the provider imports :mod:`.supervise` without loading the proxy.
"""
