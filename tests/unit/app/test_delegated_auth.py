"""Delegated authn/authz decisions, against a stub that answers reviews like the apiserver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from kccm.runtime.delegated import DelegatedAuth
from kccm.util.clock import FakeClock

USERS = {"good": ("alice", ["devs"]), "admin": ("root", ["system:masters"])}
ALLOWED = {("alice", "/metrics")}


class ReviewStub:
    def __init__(self) -> None:
        self.reviews: list[str] = []

    async def create(self, resource: Any, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.reviews.append(obj["kind"])
        spec = obj["spec"]
        if obj["kind"] == "TokenReview":
            user = USERS.get(spec["token"])
            if user is None:
                return {**obj, "status": {"authenticated": False}}
            return {
                **obj,
                "status": {"authenticated": True, "user": {"username": user[0], "groups": user[1]}},
            }
        path = spec["nonResourceAttributes"]["path"]
        return {**obj, "status": {"allowed": (spec["user"], path) in ALLOWED}}


def _request(token: str | None, path: str = "/metrics") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return make_mocked_request("GET", path, headers=headers)


@pytest.mark.parametrize(
    ("token", "status", "reviews"),
    [
        pytest.param(None, 403, ["SubjectAccessReview"], id="anonymous-is-judged-and-refused"),
        pytest.param("bogus", 401, ["TokenReview"], id="rejected-token-is-401"),
        pytest.param("good", 200, ["TokenReview", "SubjectAccessReview"], id="granted-user"),
        pytest.param("admin", 200, ["TokenReview"], id="system-masters-skips-the-review"),
    ],
)
async def test_decisions(token: str | None, status: int, reviews: list[str]) -> None:
    stub = ReviewStub()
    auth = DelegatedAuth(stub, clock=FakeClock())  # type: ignore[arg-type]
    decision = await auth(_request(token))
    assert decision.status == status
    assert stub.reviews == reviews


async def test_answers_are_cached_for_ten_seconds() -> None:
    stub, clock = ReviewStub(), FakeClock()
    auth = DelegatedAuth(stub, clock=clock)  # type: ignore[arg-type]
    for _ in range(3):
        assert (await auth(_request("good"))).allowed
    assert len(stub.reviews) == 2
    await clock.advance(11)
    await auth(_request("good"))
    assert len(stub.reviews) == 4
