"""The shared API-server behaviour table, run against the in-memory fake."""

from __future__ import annotations

import pytest

from kccm.kube.fake import FakeKube
from kccm.testing.kubecontract import CASES, KubeCase, KubeCaseEnv


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
async def test_fake_behaves_like_the_api_server(case: KubeCase) -> None:
    fake = FakeKube()

    async def compact() -> None:
        fake.compact()

    await case.run(KubeCaseEnv(client=fake, namespace="default", compact=compact))
