"""kccm explain through the apiserver's pod proxy, against a scripted apiserver on loopback:
the Lease names the leader, the proxy answers for the pod named after its host name. A leader
that runs outside a pod (a systemd unit, ``kccm dev up``) has no such pod: the CLI says so and
points at ``--endpoint`` instead of passing on the apiserver's ``pods "vm" not found``."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from kccm.app.explain_cli import run_explain

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager"
PROXY = "/api/v1/namespaces/kube-system/pods/https:vm:10258/proxy"
EXPLAINED = PROXY + "/debug/kccm/explain/service/shop/web"
HOLDER = "vm_3f1c9a2e-5b7d-4c8e-9a61-0d2b7e4f8c13"

NO_POD = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods "vm" not found',
    "reason": "NotFound",
    "details": {"name": "vm", "kind": "pods"},
    "code": 404,
}
"""What kube-apiserver answers on the proxy path of a pod that does not exist."""
NO_SERVICE = {"kind": "service", "key": "shop/web", "error": "Service shop/web not found"}
"""What kccm answers (through the proxy) for a Service it does not know."""


class Apiserver(BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, dict[str, Any]]] = {}

    def do_GET(self) -> None:
        status, body = self.answers.get(self.path, (404, {"kind": "Status", "code": 404}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[Path, type[Apiserver]]]:
    """A kubeconfig for a scripted apiserver (``answers``: path -> status, body)."""
    handler = type("Scripted", (Apiserver,), {"answers": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"server": f"http://127.0.0.1:{server.server_address[1]}"}
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    try:
        yield kubeconfig, handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("proxied", "said"),
    [
        pytest.param(
            (404, NO_POD),
            f'Error: the leader "{HOLDER}" is not a pod in namespace kube-system (no pod "vm"): '
            "kccm runs outside the cluster there (a systemd unit, `kccm dev up`), out of the "
            "pod proxy's reach; ask it directly with --endpoint https://HOST:PORT\n",
            id="leader-is-not-a-pod",
        ),
        pytest.param(
            (404, NO_SERVICE), "Error: Service shop/web not found\n", id="kccm-knows-no-service"
        ),
    ],
)
def test_a_proxied_not_found_says_what_is_missing(
    apiserver: tuple[Path, type[Apiserver]], proxied: tuple[int, dict[str, Any]], said: str
) -> None:
    kubeconfig, handler = apiserver
    handler.answers[LEASE] = (200, {"kind": "Lease", "spec": {"holderIdentity": HOLDER}})
    handler.answers[EXPLAINED] = proxied
    out, err = io.StringIO(), io.StringIO()
    assert (
        run_explain(["service", "shop/web", f"--kubeconfig={kubeconfig}"], stdout=out, stderr=err)
        == 1
    )
    assert err.getvalue() == said
    assert out.getvalue() == ""
