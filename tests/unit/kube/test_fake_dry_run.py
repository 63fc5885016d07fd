"""FakeKube honours ``dry_run``: it validates and answers like a write but stores nothing.

tests/integration/test_manifests.py checks the same on the real apiserver.
"""

from __future__ import annotations

import pytest

from kccm.kube.errors import AlreadyExists, NotFound
from kccm.kube.fake import FakeKube
from kccm.kube.interface import PatchType
from kccm.kube.resources import CONFIG_MAPS, DEPLOYMENTS, ROLE_BINDINGS, SECRETS

CM = {"metadata": {"name": "cm", "namespace": "ns"}, "data": {"a": "1"}}


async def test_dry_run_create_returns_the_object_without_storing_it() -> None:
    kube = FakeKube()
    created = await kube.create(CONFIG_MAPS, CM, dry_run=True)
    assert created["data"] == {"a": "1"}
    assert created["metadata"]["uid"]
    assert "resourceVersion" not in created["metadata"]
    with pytest.raises(NotFound):
        await kube.get(CONFIG_MAPS, "cm", namespace="ns")
    assert kube.objects(CONFIG_MAPS) == []


async def test_dry_run_create_still_validates() -> None:
    kube = FakeKube()
    await kube.create(CONFIG_MAPS, CM)
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIG_MAPS, CM, dry_run=True)


@pytest.mark.parametrize("patch_type", [PatchType.MERGE, PatchType.STRATEGIC])
async def test_dry_run_patch_answers_but_keeps_the_stored_object(patch_type: PatchType) -> None:
    kube = FakeKube()
    stored = await kube.create(CONFIG_MAPS, CM)
    patched = await kube.patch(
        CONFIG_MAPS, "cm", {"data": {"a": "2"}}, namespace="ns", patch_type=patch_type, dry_run=True
    )
    assert patched["data"] == {"a": "2"}
    assert await kube.get(CONFIG_MAPS, "cm", namespace="ns") == stored


async def test_dry_run_patch_of_a_missing_object_is_not_found() -> None:
    with pytest.raises(NotFound):
        await FakeKube().patch(CONFIG_MAPS, "nope", {}, namespace="ns", dry_run=True)


def test_deployment_artifact_resources() -> None:
    assert DEPLOYMENTS.collection_path("kube-system") == (
        "/apis/apps/v1/namespaces/kube-system/deployments"
    )
    assert ROLE_BINDINGS.object_path("rb", "kube-system") == (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/rb"
    )
    assert SECRETS.object_path("s", "kube-system") == "/api/v1/namespaces/kube-system/secrets/s"
