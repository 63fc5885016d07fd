"""A thin client of Alibaba Cloud's RPC-style APIs (ECS, VPC, SLB, NLB): one signed request per
call, on the standard library's HTTP client (docs/providers/alibabacloud.md, "The client").

A call is ``POST https://<endpoint>/?<params>`` whose parameters are the action's and the
common ones (``Action``, ``Version``, ``Format=JSON``, ``AccessKeyId``, ``RegionId``,
``SignatureMethod=HMAC-SHA1``, ``SignatureVersion=1.0``, ``SignatureNonce``, ``Timestamp``,
``SecurityToken`` with STS keys) and ``Signature``: base64 of HMAC-SHA1, keyed with
``<secret>&``, of ``POST&%2F&<percent-encoded sorted query>`` (Alibaba's "signature v1",
what the Go SDK upstream uses computes: ``sdk/auth/rpc_signature_composer.go``).

Endpoints as upstream's client manager sets them (``pkg/provider/alibaba/base/clientMgr.go``
v2.14.0): ``ECS_ENDPOINT``, ``VPC_ENDPOINT``, ``SLB_ENDPOINT``, ``NLB_ENDPOINT`` (a host, a
scheme in front is dropped) override the VPC-network default
``<product>-vpc.<region>.aliyuncs.com`` (upstream's ``--network=vpc``, its default);
``ALICLOUD_CLIENT_SCHEME=HTTP`` turns HTTPS off. Timeout 20 s.

Every request is counted in a :class:`~kccm.cloudprovider.apicalls.CloudAPICalls` ledger as
``<product>:<Action>`` (``Describe*`` read, the rest write). Errors are mapped by
:func:`~kccm.providers.alibabacloud.errors.api_error`; nothing is retried here (the call gate
and the controllers' backoff do that).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kccm.cloudprovider.apicalls import CloudAPICalls, classify_by_verb
from kccm.cloudprovider.useragent import user_agent
from kccm.providers.alibabacloud.credentials import AccessKey
from kccm.providers.alibabacloud.errors import AlibabaError, api_error

__all__ = ["PRODUCTS", "Product", "RPCClient", "percent_encode", "sign"]

TIMEOUT = 20.0


@dataclass(frozen=True)
class Product:
    """One RPC API: its short name, API version and endpoint variable."""

    name: str
    version: str
    env: str


PRODUCTS = {
    "ecs": Product("ecs", "2014-05-26", "ECS_ENDPOINT"),
    "vpc": Product("vpc", "2016-04-28", "VPC_ENDPOINT"),
    "slb": Product("slb", "2014-05-15", "SLB_ENDPOINT"),
    "nlb": Product("nlb", "2022-04-30", "NLB_ENDPOINT"),
}


def percent_encode(text: str) -> str:
    """RFC 3986 encoding, as Alibaba's signature wants it (``~`` kept, space ``%20``)."""
    return urllib.parse.quote(text, safe="-_.~")


def sign(method: str, params: Mapping[str, str], secret: str) -> str:
    """The v1 RPC signature of ``params`` (without ``Signature``)."""
    query = "&".join(f"{percent_encode(k)}={percent_encode(params[k])}" for k in sorted(params))
    text = f"{method}&{percent_encode('/')}&{percent_encode(query)}"
    digest = hmac.new(f"{secret}&".encode(), text.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def _host(value: str) -> str:
    """``parseURL``: the host of a URL or of a bare host."""
    if not value:
        return ""
    if not value.startswith("http"):
        value = f"http://{value}"
    return urllib.parse.urlsplit(value).netloc


class RPCClient:
    """Signed RPC calls for one region; thread-safe."""

    def __init__(
        self,
        region: str,
        keys: Callable[[], AccessKey],
        environ: Mapping[str, str],
        *,
        cluster_id: str = "",
        ledger: CloudAPICalls | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.region = region
        self._keys = keys
        self.ledger = ledger if ledger is not None else CloudAPICalls()
        self._now = now
        scheme = "http" if environ.get("ALICLOUD_CLIENT_SCHEME") == "HTTP" else "https"
        self.endpoints = {
            name: f"{scheme}://{_host(environ.get(p.env, '')) or self.default_host(name)}"
            for name, p in PRODUCTS.items()
        }
        self.user_agent = user_agent(f"kccm ClusterId/{cluster_id or 'clusterid'}")

    def default_host(self, product: str) -> str:
        return f"{product}-vpc.{self.region}.aliyuncs.com"

    def _signed(self, product: Product, action: str, params: Mapping[str, str]) -> str:
        key = self._keys()
        query = {
            "Action": action,
            "Version": product.version,
            "Format": "JSON",
            "AccessKeyId": key.key_id,
            "SignatureMethod": "HMAC-SHA1",
            "SignatureVersion": "1.0",
            "SignatureNonce": uuid.uuid4().hex,
            "Timestamp": self._now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "RegionId": self.region,
            **{k: str(v) for k, v in params.items()},
        }
        if key.security_token:
            query["SecurityToken"] = key.security_token
        query["Signature"] = sign("POST", query, key.secret)
        return urllib.parse.urlencode(query, quote_via=urllib.parse.quote)

    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """``action`` of ``product`` (``ecs``, ``vpc``, ``slb``, ``nlb``) with ``params`` (flat:
        ``Tag.1.Key``); the decoded answer."""
        spec = PRODUCTS[product]
        what = f"{product}:{action}"
        self.ledger.record(what, mutating=classify_by_verb(action))
        url = f"{self.endpoints[product]}/?{self._signed(spec, action, params)}"
        request = urllib.request.Request(
            url,
            data=b"",
            method="POST",
            headers={
                "User-Agent": self.user_agent,
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        status, text = self._send(request, what)
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = None
        if status >= 300 or not isinstance(body, dict):
            if isinstance(body, dict) or status >= 300:
                raise api_error(status, body, what)
            raise AlibabaError(f"{what}: HTTP {status}: the answer is not JSON", status=status)
        return body

    @staticmethod
    def _send(request: urllib.request.Request, what: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")
        except (OSError, ValueError) as err:
            raise AlibabaError(f"{what}: no answer: {err}") from err

    def token_pages(
        self, product: str, action: str, params: Mapping[str, Any], token: str = "NextToken"
    ) -> Iterator[dict[str, Any]]:
        """Every page of a ``NextToken``-paged action."""
        current = dict(params)
        while True:
            page = self.call(product, action, current)
            yield page
            following = str(page.get(token) or "")
            if not following:
                return
            current[token] = following
