"""The classic load balancer through the real signed client: the in-memory SLB behind a local
HTTP server that checks each request's signature, as Alibaba Cloud does."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from slb_fake import FakeSlb
from test_clb_alibabacloud import NODES, service

from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.credentials import AccessKey
from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.rpc import RPCClient, sign

SECRET = "the-secret"
COMMON = {
    *("Action", "Version", "Format", "AccessKeyId", "RegionId", "Timestamp"),
    *("SignatureMethod", "SignatureVersion", "SignatureNonce"),
}


@pytest.fixture
def served() -> Iterator[tuple[FakeSlb, str]]:
    slb = FakeSlb()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            given = query.pop("Signature", "")
            status, body = 200, {}
            if given != sign("POST", query, SECRET):
                status, body = 400, {"Code": "SignatureDoesNotMatch"}
            else:
                action = query["Action"]
                params = {k: v for k, v in query.items() if k not in COMMON}
                try:
                    body = slb.call("slb", action, params)
                except AlibabaError as err:
                    status, body = 400, {"Code": err.code, "Message": str(err)}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield slb, f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_ensure_twice_and_delete_through_the_signed_client(served: tuple[FakeSlb, str]) -> None:
    slb, host = served
    environ = {"SLB_ENDPOINT": host, "ALICLOUD_CLIENT_SCHEME": "HTTP"}
    rpc = RPCClient("cn-hangzhou", lambda: AccessKey("AKID", SECRET), environ, cluster_id="c1")
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    lbs = ClassicLoadBalancers(rpc, config, "vpc-1")
    svc = service()
    with collect_service_warnings():
        first = lbs.ensure_load_balancer("kubernetes", svc, NODES)
        slb.calls.clear()
        again = lbs.ensure_load_balancer("kubernetes", svc, NODES)
    assert again == first
    assert slb.mutating() == []
    (group,) = slb.vgroups.values()
    assert sorted(group["backends"]) == ["i-1", "i-2"]
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    assert slb.balancers == {}
