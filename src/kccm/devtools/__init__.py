"""Developer tools behind ``kccm dev``: ``dev up`` (a local control plane) and ``dev demo``.

Not the daemon: nothing here runs in a deployed kccm. Sits above :mod:`kccm.testing` (whose
control plane and kubelet stand-in it drives) and below :mod:`kccm.app` (whose CLI dispatches
``kccm dev ...`` here).
"""
