"""The ECS instance metadata service, as upstream reads it (``pkg/provider/alibaba/base/
metadata.go`` v2.14.0).

``METADATA_ENDPOINT`` (default ``http://100.100.100.200``), paths ``/latest/meta-data/<item>``;
with IMDSv2 (upstream's ``--enable-imdsv2``, default true) a token is first asked for with
``PUT /latest/api/token`` and header ``X-aliyun-ecs-metadata-token-ttl-seconds: 21600``, then
sent as ``X-aliyun-ecs-metadata-token``. An answer other than 200, or an empty one, is an
error. RAM role credentials: ``ram/security-credentials/`` names the role (first line),
``ram/security-credentials/<role>`` answers JSON (``AccessKeyId``, ``AccessKeySecret``,
``SecurityToken``, ``Expiration``).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError

__all__ = ["DEFAULT_ENDPOINT", "MetadataError", "MetadataService"]

DEFAULT_ENDPOINT = "http://100.100.100.200"
TOKEN_TTL_SECONDS = "21600"
TIMEOUT = 5.0


class MetadataError(CloudProviderError):
    """The metadata service could not answer."""


class MetadataService:
    """A small client of the metadata service; thread-safe."""

    def __init__(self, environ: Mapping[str, str], *, imds_v2: bool = True) -> None:
        self.endpoint = (environ.get("METADATA_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.imds_v2 = imds_v2
        self._token = ""
        self._lock = threading.Lock()

    def _open(self, request: urllib.request.Request) -> str:
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                status = int(answer.status)
                text = str(answer.read().decode())
        except urllib.error.HTTPError as err:
            status, text = err.code, ""
        except (OSError, ValueError) as err:
            raise MetadataError(f"metadata service {self.endpoint}: {err}") from err
        if status != 200:
            raise MetadataError(f"Aliyun Metadata API Error: Status Code: {status}")
        return text

    def _token_header(self) -> dict[str, str]:
        if not self.imds_v2:
            return {}
        with self._lock:
            if not self._token:
                request = urllib.request.Request(
                    f"{self.endpoint}/latest/api/token",
                    method="PUT",
                    headers={"X-aliyun-ecs-metadata-token-ttl-seconds": TOKEN_TTL_SECONDS},
                )
                self._token = self._open(request)
            return {"X-aliyun-ecs-metadata-token": str(self._token)}

    def get(self, item: str) -> str:
        """The text of ``meta-data/<item>`` (an error when empty)."""
        url = f"{self.endpoint}/latest/meta-data/{item}"
        text = self._open(urllib.request.Request(url, headers=self._token_header()))
        if not text:
            raise MetadataError(f"metadata: alivpc decode data must not be nil. url=[{url}]")
        return text

    def first_line(self, item: str) -> str:
        return self.get(item).split("\n")[0]

    def role_credentials(self) -> dict[str, Any]:
        """The instance's RAM role and its STS credentials."""
        role = self.first_line("ram/security-credentials/")
        text = self.get(f"ram/security-credentials/{role}")
        try:
            found = json.loads(text)
        except ValueError as err:
            raise MetadataError(f"metadata: RAM role {role}: not JSON") from err
        if not isinstance(found, dict):
            raise MetadataError(f"metadata: RAM role {role}: not a JSON object")
        return found
