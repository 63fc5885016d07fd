"""The credentials Secret is read at start and followed on the real apiserver."""

from __future__ import annotations

import asyncio
import base64
import contextlib

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import SECRETS
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.credentials import CredentialStore
from kccm.testing.pytest_plugin import unique_name


def _data(password: str) -> dict[str, str]:
    values = {"vc.example.username": "admin", "vc.example.password": password}
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


async def test_a_rotated_password_is_used_without_a_restart(
    kube: KubeApiClient, kube_namespace: str
) -> None:
    name = unique_name("creds")
    await kube.create(
        SECRETS,
        {"metadata": {"name": name, "namespace": kube_namespace}, "data": _data("one")},
    )
    config = load_vsphere_config(
        f"[Global]\nsecret-name = {name}\nsecret-namespace = {kube_namespace}\n"
        '[VirtualCenter "vc.example"]\n'
    )
    store = CredentialStore(config)
    vc = config.vcenters["vc.example"]
    await store.load(kube)
    assert store.get(vc).password == "one"
    stop, rotated = asyncio.Event(), asyncio.Event()
    store.add_listener(lambda _ref: rotated.set() if store.get(vc).password == "two" else None)
    watch = asyncio.create_task(store.watch(kube, stop))
    try:
        secret = await kube.get(SECRETS, name, namespace=kube_namespace)
        secret["data"] = _data("two")
        await kube.replace(SECRETS, secret)
        await asyncio.wait_for(rotated.wait(), 30)
        assert store.get(vc).password == "two"
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
