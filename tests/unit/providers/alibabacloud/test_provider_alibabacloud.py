"""Start-up as NewClientMgr: where the region and VPC come from, the metadata service with
IMDSv2, a credential that fails stops the start."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kccm.cloudprovider import CloudConfigError, CloudProviderInitError
from kccm.providers.alibabacloud import new_alibabacloud_cloud
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import AlibabaCloud, build_parts

ENV = {"ACCESS_KEY_ID": "id", "ACCESS_KEY_SECRET": "secret"}
TOKEN = "imds-token-1"
METADATA = {
    "/latest/meta-data/region-id": "cn-beijing",
    "/latest/meta-data/vpc-id": "vpc-meta",
    "/latest/meta-data/ram/security-credentials/": "the-role",
    "/latest/meta-data/ram/security-credentials/the-role": (
        '{"AccessKeyId": "STS.x", "AccessKeySecret": "y", "SecurityToken": "z", "Code": "Success"}'
    ),
}


@pytest.fixture
def metadata() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            seen.append(f"PUT {self.path}")
            ttl = self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds")
            self._answer(200 if ttl == "21600" else 400, TOKEN)

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            if self.headers.get("X-aliyun-ecs-metadata-token") != TOKEN:
                self._answer(401, "")
                return
            found = METADATA.get(self.path)
            self._answer(200 if found else 404, found or "")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_region_and_vpc_from_the_config_with_vpcid_and_vswitchid(tmp_path: Path) -> None:
    config = load_alibaba_config(
        "Global:\n  region: cn-shanghai\n  vpcid: vpc-1\n  vswitchid: vsw-1\n"
    )
    parts = build_parts(config, ENV, addon_token=tmp_path / "absent")
    assert (parts.region, parts.vpc_id) == ("cn-shanghai", "vpc-1")
    assert parts.credentials.name == "AccessKey (environment)"
    cloud = AlibabaCloud(parts)
    assert cloud.provider_name() == "alibabacloud"
    assert cloud.load_balancer() is cloud.parts.balancers
    assert cloud.routes() is parts.routes


def test_region_vpc_and_ram_role_from_the_metadata_service(
    tmp_path: Path, metadata: tuple[str, list[str]]
) -> None:
    endpoint, seen = metadata
    config = load_alibaba_config("Global:\n  region: ignored-without-vpcid\n")
    parts = build_parts(config, {"METADATA_ENDPOINT": endpoint}, addon_token=tmp_path / "absent")
    assert (parts.region, parts.vpc_id) == ("cn-beijing", "vpc-meta")
    assert parts.credentials.name == "RAM role (metadata service)"
    assert parts.credentials.get().security_token == "z"
    assert seen[0] == "PUT /latest/api/token"
    assert seen.count("PUT /latest/api/token") == 1


def test_no_region_stops_the_start(tmp_path: Path) -> None:
    environ = {**ENV, "METADATA_ENDPOINT": "http://127.0.0.1:9"}
    with pytest.raises(CloudProviderInitError, match="region"):
        build_parts(load_alibaba_config("Global: {}\n"), environ, addon_token=tmp_path / "absent")


def test_the_cloud_config_is_required() -> None:
    with pytest.raises(CloudConfigError, match="--cloud-config"):
        new_alibabacloud_cloud(None)
    with pytest.raises(CloudConfigError, match="nodeMonitorPeriod"):
        new_alibabacloud_cloud(io.StringIO("Global:\n  nodeMonitorPeriod: soon\n"))
