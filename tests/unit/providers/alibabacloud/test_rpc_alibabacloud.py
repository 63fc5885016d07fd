"""The signed RPC client and the error mapping (a local HTTP server checks each request)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kccm.cloudprovider.reasons import Reason, classify
from kccm.providers.alibabacloud.credentials import AccessKey
from kccm.providers.alibabacloud.errors import AlibabaError, AlibabaThrottled, api_error
from kccm.providers.alibabacloud.rpc import RPCClient, sign


def test_signature_matches_alibabas_documented_example() -> None:
    params = {
        "AccessKeyId": "testid",
        "Action": "DescribeRegions",
        "Format": "XML",
        "SignatureMethod": "HMAC-SHA1",
        "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
        "SignatureVersion": "1.0",
        "Timestamp": "2016-02-23T12:46:24Z",
        "Version": "2014-05-26",
    }
    assert sign("GET", params, "testsecret") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="


def test_signature_equals_the_go_sdks_on_awkward_characters() -> None:
    """The expected value was computed by the Go SDK upstream vendors
    (``sdk/utils.GetUrlFormedMap`` + ``buildRpcStringToSign``'s replacements + ``ShaHmac1``,
    alibaba-cloud-sdk-go in cloud-provider-alibaba-cloud v2.14.0's vendor/)."""
    params = {
        "Action": "DescribeInstances",
        "Version": "2014-05-26",
        "Format": "JSON",
        "AccessKeyId": "AKID",
        "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0",
        "SignatureNonce": "n-1",
        "Timestamp": "2026-11-28T20:00:00Z",
        "RegionId": "cn-hangzhou",
        "InstanceIds": '["i-1","i-2"]',
        "Tag.1.Key": "ack.aliyun.com",
        "Odd": "a b*c~d/e+f=g&h",
    }
    assert sign("POST", params, "the-secret") == "pP4OUi3+Jn5N26gtdfW6amyeJIg="


class _Server:
    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.answer: tuple[int, dict[str, Any]] = (200, {"RequestId": "r-1"})
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                outer.seen.append(query)
                given = query.pop("Signature", "")
                ok = given == sign("POST", query, "the-secret")
                status, body = outer.answer if ok else (400, {"Code": "SignatureDoesNotMatch"})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[_Server]:
    running = _Server()
    yield running
    running.close()


def client(server: _Server, token: str = "") -> RPCClient:
    environ = {
        "ECS_ENDPOINT": f"http://{server.address}",
        "VPC_ENDPOINT": server.address,
        "ALICLOUD_CLIENT_SCHEME": "HTTP",
    }
    return RPCClient("cn-hangzhou", lambda: AccessKey("AKID", "the-secret", token), environ)


def test_a_call_is_signed_with_the_common_parameters(server: _Server) -> None:
    answer = client(server, token="sts-token").call(
        "ecs", "DescribeInstances", {"InstanceIds": '["i-1"]'}
    )
    assert answer == {"RequestId": "r-1"}
    sent = server.seen[0]
    assert sent["Action"] == "DescribeInstances"
    assert sent["Version"] == "2014-05-26"
    assert (sent["RegionId"], sent["AccessKeyId"], sent["SecurityToken"]) == (
        "cn-hangzhou",
        "AKID",
        "sts-token",
    )
    assert sent["InstanceIds"] == '["i-1"]'
    assert (sent["SignatureMethod"], sent["SignatureVersion"], sent["Format"]) == (
        "HMAC-SHA1",
        "1.0",
        "JSON",
    )


def test_endpoints_honour_upstreams_variables(server: _Server) -> None:
    rpc = client(server)
    assert rpc.endpoints["ecs"] == f"http://{server.address}"
    assert rpc.endpoints["vpc"] == f"http://{server.address}"
    assert rpc.endpoints["slb"] == "http://slb-vpc.cn-hangzhou.aliyuncs.com"
    rpc.call("vpc", "DescribeRouteTableList", {})
    assert server.seen[0]["Version"] == "2016-04-28"
    assert rpc.ledger.snapshot().reads == {"vpc:DescribeRouteTableList": 1}


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        pytest.param(400, "Throttling.User", Reason.THROTTLED, id="throttling-user"),
        pytest.param(503, "ServiceUnavailable", Reason.THROTTLED, id="service-unavailable"),
        pytest.param(400, "Throttling", Reason.THROTTLED, id="throttling"),
        pytest.param(403, "Forbidden.RAM", Reason.PERMISSION, id="ram-forbidden"),
        pytest.param(404, "InvalidAccessKeyId.NotFound", Reason.PERMISSION, id="bad-key"),
        pytest.param(400, "QuotaExceed.Route", Reason.QUOTA, id="quota"),
        pytest.param(400, "InvalidParameter", Reason.CLOUD_API, id="other"),
    ],
)
def test_error_codes_map_to_explain_reasons(
    server: _Server, status: int, code: str, reason: Reason
) -> None:
    server.answer = (status, {"Code": code, "Message": "m", "RequestId": "req-9"})
    with pytest.raises(AlibabaError) as caught:
        client(server).call("ecs", "DescribeInstances", {})
    assert classify(caught.value) is reason
    assert code in str(caught.value)
    assert "req-9" in str(caught.value)


def test_throttled_is_the_call_gates_error() -> None:
    error = api_error(400, {"Code": "Throttling.Api"}, "ecs:DescribeInstances")
    assert isinstance(error, AlibabaThrottled)
    assert error.retry_after is None


def test_a_wrong_secret_is_refused(server: _Server) -> None:
    environ = {"ECS_ENDPOINT": server.address, "ALICLOUD_CLIENT_SCHEME": "HTTP"}
    rpc = RPCClient("cn-hangzhou", lambda: AccessKey("AKID", "other"), environ)
    with pytest.raises(AlibabaError) as caught:
        rpc.call("ecs", "DescribeInstances", {})
    assert classify(caught.value) is Reason.PERMISSION
