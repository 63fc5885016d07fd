"""The thin ARM client against a scripted ARM (a real HTTP server): the request shapes
(api-version, bearer token, If-Match), paging, long-running operations, the read-mutate-write
loop on 412, error typing, and throttling that pauses instead of retrying."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from az_arm_stub import Answer, StaticToken, StubARM, stub_arm
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import PermissionDenied, QuotaExceeded, Throttled
from kccm.cloudprovider.gate import CallGate
from kccm.providers.azure.arm import ARMClient, ratelimit_exhausted, retry_after_seconds
from kccm.providers.azure.arm_errors import (
    ARMConflict,
    ARMError,
    ARMNotFound,
    ARMOperationFailed,
    ARMPermissionDenied,
    ARMPreconditionFailed,
    ARMQuotaExceeded,
    ARMThrottled,
)

RG = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network"
LB = f"{RG}/loadBalancers/kubernetes"
VERSION = "2025-05-01"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture(scope="module")
def server() -> Iterator[StubARM]:
    yield from stub_arm()


@pytest.fixture
def arm(server: StubARM) -> Iterator[StubARM]:
    yield server
    server.reset()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(arm: StubARM, clock: Clock) -> ARMClient:
    return ARMClient(
        arm.url,
        StaticToken(),  # type: ignore[arg-type]
        "https://management.azure.com/.default",
        subscription_id="sub",
        enforce_https=False,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        poll_interval=2.0,
    )


def test_get_sends_the_api_version_a_bearer_token_and_counts_a_read(
    arm: StubARM, client: ARMClient
) -> None:
    arm.on("GET", LB, Answer(200, {"name": "kubernetes", "etag": 'W/"1"'}))
    assert client.get(LB, VERSION, operation="loadBalancers.get")["name"] == "kubernetes"
    (got,) = arm.requests()
    assert got.query["api-version"] == [VERSION]
    assert got.headers["authorization"] == "Bearer stub-token"
    assert "kccm/" in got.headers["user-agent"]
    assert "x-ms-client-request-id" in got.headers
    assert client.ledger.snapshot().reads == {"loadBalancers.get": 1}


def test_find_is_none_on_404_and_get_raises(arm: StubARM, client: ARMClient) -> None:
    assert client.find(LB, VERSION, operation="lb") is None
    with pytest.raises(ARMNotFound) as caught:
        client.get(LB, VERSION, operation="lb")
    assert caught.value.code == "NotFound"


def test_list_follows_next_link_across_pages(arm: StubARM, client: ARMClient) -> None:
    arm.on(
        "GET",
        f"{RG}/loadBalancers",
        Answer(200, {"value": [{"name": "a"}], "nextLink": f"{arm.url}/page2?api-version=x"}),
    )
    arm.on("GET", "/page2", Answer(200, {"value": [{"name": "b"}]}))
    names = [lb["name"] for lb in client.list(f"{RG}/loadBalancers", VERSION, operation="ls")]
    assert names == ["a", "b"]
    assert [g.path for g in arm.requests()] == [f"{RG}/loadBalancers", "/page2"]
    assert arm.requests()[1].query["api-version"] == ["x"]


ERRORS = [
    pytest.param(404, "ResourceNotFound", ARMNotFound, id="404-not-found"),
    pytest.param(412, "PreconditionFailed", ARMPreconditionFailed, id="412-stale-etag"),
    pytest.param(409, "AnotherOperationInProgress", ARMConflict, id="409-conflict"),
    pytest.param(403, "AuthorizationFailed", ARMPermissionDenied, id="403-no-role"),
    pytest.param(401, "InvalidAuthenticationToken", ARMPermissionDenied, id="401-token"),
    pytest.param(400, "PublicIPCountLimitReached", ARMQuotaExceeded, id="400-limit"),
    pytest.param(409, "QuotaExceeded", ARMQuotaExceeded, id="409-quota"),
    pytest.param(400, "InvalidResourceReference", ARMError, id="400-other"),
]


@pytest.mark.parametrize(("status", "code", "kind"), ERRORS)
def test_arm_errors_are_typed_with_their_code(
    arm: StubARM, client: ARMClient, status: int, code: str, kind: type[ARMError]
) -> None:
    arm.on("GET", LB, Answer(status, {"error": {"code": code, "message": "nope"}}))
    with pytest.raises(ARMError) as caught:
        client.get(LB, VERSION, operation="lb")
    assert type(caught.value) is kind
    assert caught.value.code == code
    assert caught.value.status == status
    assert code in str(caught.value)


def test_quota_and_permission_errors_carry_the_contract_reasons() -> None:
    assert issubclass(ARMQuotaExceeded, QuotaExceeded)
    assert issubclass(ARMPermissionDenied, PermissionDenied)
    assert issubclass(ARMThrottled, Throttled)


def test_put_sends_the_body_etag_as_if_match(arm: StubARM, client: ARMClient) -> None:
    arm.on("PUT", LB, Answer(200, {"name": "kubernetes", "etag": 'W/"2"'}))
    result = client.put(LB, {"etag": 'W/"1"', "properties": {}}, VERSION, operation="lb.put")
    assert result["etag"] == 'W/"2"'
    (got,) = arm.requests("PUT")
    assert got.headers["if-match"] == 'W/"1"'
    assert got.body == {"etag": 'W/"1"', "properties": {}}
    assert client.ledger.snapshot().writes == {"lb.put": 1}


def test_put_without_etag_sends_no_if_match(arm: StubARM, client: ARMClient) -> None:
    arm.on("PUT", LB, Answer(201, {"name": "kubernetes"}))
    client.put(LB, {"properties": {}}, VERSION, operation="lb.put")
    assert "if-match" not in arm.requests("PUT")[0].headers


def test_put_polls_azure_async_operation_then_reads_the_resource(
    arm: StubARM, client: ARMClient, clock: Clock
) -> None:
    arm.on(
        "PUT",
        LB,
        Answer(201, {"name": "kubernetes"}, {"Azure-AsyncOperation": "{url}/op/1"}),
    )
    arm.on(
        "GET",
        "/op/1",
        Answer(200, {"status": "InProgress"}, {"Retry-After": "3"}),
        Answer(200, {"status": "InProgress"}),
        Answer(200, {"status": "Succeeded"}),
    )
    arm.on("GET", LB, Answer(200, {"name": "kubernetes", "etag": 'W/"9"'}))
    assert client.put(LB, {}, VERSION, operation="lb.put")["etag"] == 'W/"9"'
    assert [g.path for g in arm.requests()] == [LB, "/op/1", "/op/1", "/op/1", LB]
    assert clock.slept == [3.0, 2.0]
    assert client.ledger.snapshot().reads == {"lb.put:poll": 4}


def test_a_failed_operation_raises_with_arm_s_code(arm: StubARM, client: ARMClient) -> None:
    arm.on("PUT", LB, Answer(201, {}, {"Azure-AsyncOperation": "{url}/op/2"}))
    arm.on(
        "GET",
        "/op/2",
        Answer(200, {"status": "Failed", "error": {"code": "InvalidFrontend", "message": "x"}}),
    )
    with pytest.raises(ARMOperationFailed) as caught:
        client.put(LB, {}, VERSION, operation="lb.put")
    assert caught.value.code == "InvalidFrontend"


def test_delete_polls_location_until_it_stops_answering_202(
    arm: StubARM, client: ARMClient
) -> None:
    arm.on("DELETE", LB, Answer(202, None, {"Location": "{url}/loc/1", "Retry-After": "0"}))
    arm.on("GET", "/loc/1", Answer(202, None), Answer(204, None))
    assert client.delete(LB, VERSION, operation="lb.delete") is True
    assert [g.path for g in arm.requests("GET")] == ["/loc/1", "/loc/1"]


@pytest.mark.parametrize(
    ("answer", "existed"),
    [
        pytest.param(Answer(200, None), True, id="200-deleted"),
        pytest.param(Answer(204, None), False, id="204-absent"),
        pytest.param(Answer(404, {"error": {"code": "NotFound"}}), False, id="404-absent"),
    ],
)
def test_delete_says_whether_something_was_deleted(
    arm: StubARM, client: ARMClient, answer: Answer, existed: bool
) -> None:
    arm.on("DELETE", LB, answer)
    assert client.delete(LB, VERSION, operation="lb.delete") is existed


def test_put_answered_with_a_provisioning_state_polls_the_resource(
    arm: StubARM, client: ARMClient
) -> None:
    arm.on("PUT", LB, Answer(200, {"properties": {"provisioningState": "Updating"}}))
    arm.on(
        "GET",
        LB,
        Answer(200, {"properties": {"provisioningState": "Updating"}}),
        Answer(200, {"properties": {"provisioningState": "Succeeded"}, "etag": "e"}),
    )
    assert client.put(LB, {}, VERSION, operation="lb.put")["etag"] == "e"


def _add_rule(name: str) -> Any:
    def mutate(lb: dict[str, Any]) -> dict[str, Any] | None:
        rules = lb.setdefault("rules", [])
        if name in rules:
            return None
        rules.append(name)
        return lb

    return mutate


def test_update_writes_nothing_when_mutate_changes_nothing(arm: StubARM, client: ARMClient) -> None:
    arm.on("GET", LB, Answer(200, {"etag": "1", "rules": ["a"]}))
    assert client.update(LB, VERSION, _add_rule("a"), operation="lb.put") == {
        "etag": "1",
        "rules": ["a"],
    }
    assert arm.requests("PUT") == []
    assert client.ledger.snapshot().writes == {}


def test_update_rereads_and_mutates_again_after_412(arm: StubARM, client: ARMClient) -> None:
    arm.on(
        "GET",
        LB,
        Answer(200, {"etag": "1", "rules": ["a"]}),
        Answer(200, {"etag": "2", "rules": ["a", "other"]}),
    )
    arm.on(
        "PUT",
        LB,
        Answer(412, {"error": {"code": "PreconditionFailed", "message": "etag"}}),
        Answer(200, {"etag": "3", "rules": ["a", "other", "b"]}),
    )
    result = client.update(LB, VERSION, _add_rule("b"), operation="lb.put")
    assert result is not None
    assert result["etag"] == "3"
    puts = arm.requests("PUT")
    assert [p.headers["if-match"] for p in puts] == ["1", "2"]
    assert puts[1].body["rules"] == ["a", "other", "b"]  # the other writer's rule is kept


def test_update_gives_up_after_its_attempts(arm: StubARM, client: ARMClient) -> None:
    arm.on("GET", LB, Answer(200, {"etag": "1"}))
    arm.on("PUT", LB, Answer(412, {"error": {"code": "PreconditionFailed"}}))
    with pytest.raises(ARMPreconditionFailed):
        client.update(LB, VERSION, _add_rule("b"), operation="lb.put", attempts=2)
    assert len(arm.requests("PUT")) == 2


def test_update_of_a_missing_resource_is_none(arm: StubARM, client: ARMClient) -> None:
    assert client.update(LB, VERSION, _add_rule("b"), operation="lb.put") is None
    assert arm.requests("PUT") == []


# -- throttling -----------------------------------------------------------------------------------


def test_429_raises_throttled_and_holds_that_kind_back_until_retry_after(
    arm: StubARM, client: ARMClient, clock: Clock
) -> None:
    arm.on(
        "GET",
        LB,
        Answer(429, {"error": {"code": "TooManyRequests"}}, {"Retry-After": "7"}),
        Answer(200, {"name": "kubernetes"}),
    )
    arm.on("PUT", LB, Answer(200, {}))
    with pytest.raises(ARMThrottled) as first:
        client.get(LB, VERSION, operation="lb")
    assert first.value.retry_after == 7.0
    clock.now += 3
    with pytest.raises(ARMThrottled) as held:
        client.get(LB, VERSION, operation="lb")
    assert held.value.retry_after == pytest.approx(4.0)
    assert len(arm.requests("GET")) == 1  # not sent: no tight loop against ARM
    client.put(LB, {}, VERSION, operation="lb.put")  # writes are another budget
    clock.now += 4
    assert client.get(LB, VERSION, operation="lb")["name"] == "kubernetes"
    assert clock.slept == []  # nothing waited inside the client


def test_a_remaining_counter_at_zero_holds_back_the_next_request_of_its_kind_once(
    arm: StubARM, client: ARMClient
) -> None:
    arm.on(
        "GET", LB, Answer(200, {"name": "a"}, {"x-ms-ratelimit-remaining-subscription-reads": "0"})
    )
    client.get(LB, VERSION, operation="lb")
    with pytest.raises(ARMThrottled) as held:
        client.get(LB, VERSION, operation="lb")
    assert held.value.retry_after is None  # the gate backs off on its own schedule
    assert len(arm.requests("GET")) == 1
    client.get(LB, VERSION, operation="lb")
    assert len(arm.requests("GET")) == 2


def test_server_errors_are_retried_three_times_with_backoff(
    arm: StubARM, client: ARMClient, clock: Clock
) -> None:
    arm.on("GET", LB, Answer(503, {"error": {"code": "ServerBusy"}}))
    with pytest.raises(ARMError) as caught:
        client.get(LB, VERSION, operation="lb")
    assert caught.value.status == 503
    assert len(arm.requests("GET")) == 4
    assert clock.slept == [5.0, 10.0, 20.0]


async def test_a_throttled_provider_call_pauses_its_group_in_the_call_gate(
    arm: StubARM, client: ARMClient
) -> None:
    """What ``kccm explain`` reads: the group's ``throttled_for`` after ARM's 429."""
    arm.on("GET", LB, Answer(429, {"error": {"code": "TooManyRequests"}}, {"Retry-After": "30"}))
    gate = CallGate(registry=CollectorRegistry())

    def get_load_balancer() -> dict[str, Any]:
        return client.get(LB, VERSION, operation="lb")

    try:
        with pytest.raises(ARMThrottled):
            await gate.call("get_load_balancer", get_load_balancer)
        (group,) = gate.snapshot()
        assert group.group == "load_balancer"
        assert group.throttled_for > 25
    finally:
        gate.close()


@pytest.mark.parametrize(
    ("headers", "kinds"),
    [
        pytest.param({"x-ms-ratelimit-remaining-subscription-reads": "11999"}, set(), id="left"),
        pytest.param({"x-ms-ratelimit-remaining-subscription-reads": "0"}, {"read"}, id="reads"),
        pytest.param({"X-Ms-Ratelimit-Remaining-Tenant-Writes": "0"}, {"write"}, id="writes"),
        pytest.param(
            {"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/GetVM3Min;0,GetVM30Min;40"},
            {"any"},
            id="compute-policy",
        ),
        pytest.param({"content-type": "application/json"}, set(), id="none"),
    ],
)
def test_ratelimit_exhausted(headers: dict[str, str], kinds: set[str]) -> None:
    assert ratelimit_exhausted(headers) == kinds


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("12", 12.0, id="seconds"),
        pytest.param("", None, id="empty"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("Mon, 01 Jan 2001 00:00:00 GMT", 0.0, id="date-in-the-past"),
    ],
)
def test_retry_after_seconds(value: str, seconds: float | None) -> None:
    assert retry_after_seconds(value) == seconds


@pytest.mark.parametrize(
    ("state", "fails"),
    [pytest.param("Succeeded", False, id="succeeded"), pytest.param("Failed", True, id="failed")],
)
def test_a_put_answered_in_a_terminal_state_is_not_polled(
    arm: StubARM, client: ARMClient, state: str, fails: bool
) -> None:
    """As the Go SDK: a body already ``Succeeded`` (or ``Failed``) needs no poll, even with an
    ``Azure-AsyncOperation`` header."""
    body = {"name": "kubernetes", "properties": {"provisioningState": state}}
    arm.on("PUT", LB, Answer(201, body, {"Azure-AsyncOperation": "{url}/op/9"}))
    arm.on("GET", "/op/9", Answer(200, {"status": "Succeeded"}))
    if fails:
        with pytest.raises(ARMOperationFailed):
            client.put(LB, {}, VERSION, operation="lb.put")
    else:
        assert client.put(LB, {}, VERSION, operation="lb.put") == body
    assert arm.requests("GET") == []
