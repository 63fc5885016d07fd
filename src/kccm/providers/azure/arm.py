"""A thin ARM client on azure-core's pipeline: GET, paged LIST, PUT with ETags, DELETE, LROs.

Why not azure-mgmt-compute / azure-mgmt-network: they ship the models of every API version
(a large install, a slow import and memory kccm keeps for nothing), and their newest
``api-version`` is not upstream's. This client sends exactly what upstream v1.36.5 sends
(:mod:`kccm.providers.azure.versions`), so kccm's and upstream's request logs compare line for
line; the mgmt SDKs are test dependencies only (they check the emulator).

Requests go through an ``azure.core.pipeline.Pipeline``: a client request ID, the user agent, a
bearer token from azure-identity for the cloud's scope, then ``requests``.

What the calls do (each counted in :attr:`ARMClient.ledger`, a GET as a read, anything else as
a write, under the caller's ``operation`` name):

- :meth:`ARMClient.get` / :meth:`ARMClient.find`: one resource (``find``: ``None`` on 404);
- :meth:`ARMClient.list`: every item of ``value`` across the pages, following ``nextLink``;
- :meth:`ARMClient.put`: create or replace; the body's ``etag`` goes in ``If-Match`` (as
  upstream's ``policy/etag``), and a long-running answer is polled (:mod:`.arm_lro`);
- :meth:`ARMClient.update`: read, let the caller's ``mutate`` change a copy (``None``: nothing
  to change, no write), PUT it with ``If-Match``; ``412`` (someone wrote in between) re-reads
  and calls ``mutate`` again, up to ``attempts`` times;
- :meth:`ARMClient.delete`: delete and poll; ``False`` when it was already gone.

Errors are typed (:mod:`.arm_errors`). ``408``/``500``/``502``/``503``/``504`` are retried 3
times, 5 s apart doubling up to 60 s (upstream's ``GetDefaultAzCoreClientOption``). ``429`` is
never retried here: it raises :class:`~.arm_errors.ARMThrottled` with ``Retry-After``, the call
gate pauses that group of provider calls, and until ``Retry-After`` has passed every request of
the same kind (reads or writes) fails at once without being sent (upstream's
``retryrepectthrottled`` policy). When ARM's ``x-ms-ratelimit-remaining-*`` headers say no
request of a kind is left, the next request of that kind is not sent either: it raises
``ARMThrottled`` so that the gate backs off first.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
import requests.adapters
from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError, ClientAuthenticationError
from azure.core.pipeline import Pipeline
from azure.core.pipeline.policies import (
    BearerTokenCredentialPolicy,
    RequestIdPolicy,
    UserAgentPolicy,
)
from azure.core.pipeline.transport import RequestsTransport
from azure.core.rest import HttpRequest

from kccm import __version__
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.providers.azure.arm_errors import (
    ARMError,
    ARMNotFound,
    ARMPreconditionFailed,
    ARMThrottled,
    arm_error,
)
from kccm.providers.azure.arm_lro import Poller, Sent, retry_after_seconds

__all__ = ["USER_AGENT", "ARMClient", "Mutate", "ratelimit_exhausted", "retry_after_seconds"]

log = logging.getLogger(__name__)

USER_AGENT = f"kccm/{__version__} cloud-provider-azure-compatible"
RETRY_STATUSES = (408, 500, 502, 503, 504)
MAX_RETRIES = 3
RETRY_DELAY = 5.0
MAX_RETRY_DELAY = 60.0
POOL_SIZE = 32
TIMEOUT = 60.0
"""Seconds per request (upstream's ``http.Client.Timeout``: one minute)."""

Mutate = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Given a copy of the resource as read, the body to PUT, or ``None`` when nothing changes."""


def ratelimit_exhausted(headers: Mapping[str, str]) -> set[str]:
    """The kinds (``read``, ``write``, ``any``) whose ``x-ms-ratelimit-remaining-*`` counter
    is at 0: ``...-subscription-reads: 0``, ``...-tenant-writes: 0``, or Compute's
    ``x-ms-ratelimit-remaining-resource: Microsoft.Compute/HighCostGet3Min;0``."""
    kinds: set[str] = set()
    for name, value in headers.items():
        lowered = name.lower()
        if not lowered.startswith("x-ms-ratelimit-remaining-"):
            continue
        counts = [part.rpartition(";")[2].strip() for part in str(value).split(",")]
        if not any(count == "0" for count in counts):
            continue
        if lowered.endswith("reads"):
            kinds.add("read")
        elif lowered.endswith(("writes", "deletes")):
            kinds.add("write")
        else:
            kinds.add("any")
    return kinds


def _kind(method: str) -> str:
    return "read" if method in ("GET", "HEAD") else "write"


def _with_version(url: str, api_version: str, params: Mapping[str, str] | None) -> str:
    """``url`` with ``api-version`` (replacing any) and ``params``."""
    parts = urlsplit(url)
    kept = parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, v) for k, v in kept if k != "api-version"]
    query.append(("api-version", api_version))
    query.extend((params or {}).items())
    return urlunsplit(parts._replace(query=urlencode(query, safe="$,/:")))


class _Gatekeeper:
    """Upstream's ``ThrottlingPolicy``, one per kind: after a ``429`` no request of that kind
    is sent until ``Retry-After`` has passed; after a remaining-counter at 0, the next request
    of that kind is not sent once."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._until: dict[str, float] = {}
        self._exhausted: set[str] = set()
        self._lock = threading.Lock()

    def check(self, kind: str, what: str) -> None:
        with self._lock:
            left = self._until.get(kind, 0.0) - self._monotonic()
            if left > 0:
                raise ARMThrottled(
                    f"{what}: not sent, ARM throttles {kind}s for {left:.1f}s more",
                    retry_after=left,
                    status=0,
                )
            if kind in self._exhausted or "any" in self._exhausted:
                self._exhausted.discard(kind)
                self._exhausted.discard("any")
                raise ARMThrottled(
                    f"{what}: not sent, ARM says no {kind} request is left "
                    "(x-ms-ratelimit-remaining-*: 0)",
                    retry_after=None,
                    status=0,
                )

    def throttled(self, kind: str, retry_after: float | None) -> None:
        with self._lock:
            until = self._monotonic() + (retry_after or 0.0)
            self._until[kind] = max(self._until.get(kind, 0.0), until)

    def observe(self, headers: Mapping[str, str]) -> None:
        exhausted = ratelimit_exhausted(headers)
        if exhausted:
            with self._lock:
                self._exhausted |= exhausted


class _RenewingBearerPolicy(BearerTokenCredentialPolicy[Any, Any]):
    """azure-core's bearer policy that also renews a token ARM refused.

    On a ``401`` with a challenge, azure-core drops its cached token but asks again only for a
    claims challenge (``insufficient_claims``); for an expired or revoked token
    (``ExpiredAuthenticationToken``, ``InvalidAuthenticationToken``) the credential would answer
    from MSAL's cache, which still believes the token valid. Here any other challenge asks the
    credential for a new token with claims (MSAL then bypasses its cache) and sends the request
    once more; a second 401 is returned as it is (a really refused identity does not loop)."""

    def __init__(self, credential: TokenCredential, scope: str) -> None:
        super().__init__(credential, scope)
        self._scope = scope

    def on_challenge(self, request: Any, response: Any) -> bool:
        if super().on_challenge(request, response):
            return True
        if request.context.get("kccm_renewed"):
            return False
        request.context["kccm_renewed"] = True
        fresh = {"access_token": {"nbf": {"essential": True, "value": str(int(time.time()))}}}
        claims = json.dumps(fresh)
        self.authorize_request(request, self._scope, claims=claims)
        return True


def _session() -> requests.Session:
    http = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=POOL_SIZE)
    http.mount("https://", adapter)
    http.mount("http://", adapter)
    return http


class ARMClient:
    """ARM for one subscription (see the module doc). Thread-safe."""

    def __init__(
        self,
        endpoint: str,
        credential: TokenCredential,
        scope: str,
        *,
        subscription_id: str,
        user_agent: str = "",
        verify: bool | str = True,
        enforce_https: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        poll_interval: float = 5.0,
        transport: Any = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.subscription_id = subscription_id
        self.ledger = CloudAPICalls()
        self._sleep = sleep
        self._verify = verify
        self._enforce_https = enforce_https
        self._gate = _Gatekeeper(monotonic)
        self._poller = Poller(self._send, sleep=sleep, default_interval=poll_interval)
        self._pipeline: Pipeline[Any, Any] = Pipeline(
            transport=transport or RequestsTransport(session=_session(), session_owner=True),
            policies=[
                RequestIdPolicy(),
                UserAgentPolicy(base_user_agent=user_agent or USER_AGENT),
                _RenewingBearerPolicy(credential, scope),
            ],
        )

    # -- paths ------------------------------------------------------------------------------

    def resource_id(self, resource_group: str, kind: str, name: str, *children: str) -> str:
        """``/subscriptions/<sub>/resourceGroups/<rg>/providers/<kind>/<name>[/<child>...]``;
        ``kind`` as ``Microsoft.Network/loadBalancers``."""
        tail = "".join(f"/{child}" for child in children)
        return (
            f"/subscriptions/{self.subscription_id}/resourceGroups/{resource_group}"
            f"/providers/{kind}/{name}{tail}"
        )

    def collection(self, resource_group: str, kind: str) -> str:
        """``/subscriptions/<sub>/resourceGroups/<rg>/providers/<kind>``: a list's path."""
        group = f"/subscriptions/{self.subscription_id}/resourceGroups/{resource_group}"
        return f"{group}/providers/{kind}"

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else f"{self.endpoint}{path}"

    # -- the verbs --------------------------------------------------------------------------

    def get(
        self,
        path: str,
        api_version: str,
        *,
        operation: str,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The resource; :class:`~.arm_errors.ARMNotFound` when it does not exist."""
        url = _with_version(self.url(path), api_version, params)
        return self._send("GET", url, operation=operation).json_body()

    def find(
        self,
        path: str,
        api_version: str,
        *,
        operation: str,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """The resource, or ``None`` when ARM answers 404."""
        try:
            return self.get(path, api_version, operation=operation, params=params)
        except ARMNotFound:
            return None

    def list(
        self,
        path: str,
        api_version: str,
        *,
        operation: str,
        params: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Every item of every page (``value``, then ``nextLink`` as ARM gives it)."""
        return list(self.pages(path, api_version, operation=operation, params=params))

    def pages(
        self,
        path: str,
        api_version: str,
        *,
        operation: str,
        params: Mapping[str, str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        url: str | None = _with_version(self.url(path), api_version, params)
        while url:
            page = self._send("GET", url, operation=operation).json_body()
            yield from (item for item in page.get("value") or () if isinstance(item, dict))
            url = str(page.get("nextLink") or "") or None

    def put(
        self,
        path: str,
        body: Mapping[str, Any],
        api_version: str,
        *,
        operation: str,
        if_match: str | None = None,
    ) -> dict[str, Any]:
        """Create or replace; the resource as ARM has it once the operation is over. The
        body's ``etag`` (or ``if_match``) is sent as ``If-Match``."""
        url = _with_version(self.url(path), api_version, None)
        etag = if_match if if_match is not None else body.get("etag")
        headers = {"If-Match": str(etag)} if etag else {}
        sent = self._send("PUT", url, operation=operation, body=body, headers=headers)
        return self._poller.settle(sent, url, operation=operation, method="PUT")

    def update(
        self,
        path: str,
        api_version: str,
        mutate: Mutate,
        *,
        operation: str,
        attempts: int = 3,
    ) -> dict[str, Any] | None:
        """Read, ``mutate``, PUT with ``If-Match``; re-read on ``412``. Returns the resource as
        written, or as read when ``mutate`` changed nothing (no write), or ``None`` when it does
        not exist (``mutate`` is not called)."""
        for attempt in range(1, attempts + 1):
            current = self.find(path, api_version, operation=f"{operation}:get")
            if current is None:
                return None
            wanted = mutate(copy.deepcopy(current))
            if wanted is None:
                return current
            try:
                return self.put(
                    path, wanted, api_version, operation=operation, if_match=current.get("etag")
                )
            except ARMPreconditionFailed:
                if attempt == attempts:
                    raise
                log.info("azure: %s: changed meanwhile (412), reading it again", operation)
        raise AssertionError("unreachable")

    def delete(self, path: str, api_version: str, *, operation: str) -> bool:
        """Delete and wait until it is gone; ``False`` when it did not exist (ARM answers a
        DELETE of a missing resource ``204``; ``404`` when its parent is missing)."""
        url = _with_version(self.url(path), api_version, None)
        sent = self._send("DELETE", url, operation=operation, absent_ok=True)
        if sent.status in (204, 404):
            return False
        self._poller.settle(sent, url, operation=operation, method="DELETE")
        return True

    def poll_lro(self, sent: Sent, url: str, *, operation: str, method: str) -> dict[str, Any]:
        """Wait for an operation ``sent`` started (for callers sending their own verbs)."""
        return self._poller.settle(sent, url, operation=operation, method=method)

    # -- sending ----------------------------------------------------------------------------

    def send(
        self,
        method: str,
        path: str,
        api_version: str,
        *,
        operation: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Sent:
        """One request as is (``POST`` actions and the like); the answer unpolled."""
        url = _with_version(self.url(path), api_version, None)
        return self._send(method, url, operation=operation, body=body, headers=headers)

    def _send(
        self,
        method: str,
        url: str,
        *,
        operation: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        absent_ok: bool = False,
    ) -> Sent:
        kind = _kind(method)
        self._gate.check(kind, operation)
        for attempt in range(MAX_RETRIES + 1):
            sent = self._send_once(method, url, operation, body, headers)
            if sent.status not in RETRY_STATUSES or attempt == MAX_RETRIES:
                break
            delay = sent.retry_after
            if delay is None:
                delay = min(RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
            log.info("azure: %s: HTTP %s, retrying in %.1fs", operation, sent.status, delay)
            self._sleep(delay)
        self._gate.observe(sent.headers)
        if sent.status == 429:
            self._gate.throttled(kind, sent.retry_after)
        if sent.status >= 400 and not (absent_ok and sent.status == 404):
            raise arm_error(
                sent.status,
                sent.body,
                f"{method} {operation}",
                retry_after=sent.retry_after,
                text=sent.text,
            )
        return sent

    def _send_once(
        self,
        method: str,
        url: str,
        operation: str,
        body: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> Sent:
        self.ledger.record(operation, mutating=method != "GET")
        request = HttpRequest(method, url, json=body, headers=dict(headers or {}))
        try:
            response = self._pipeline.run(
                request,
                enforce_https=self._enforce_https,
                connection_verify=self._verify,
                connection_timeout=TIMEOUT,
                read_timeout=TIMEOUT,
            ).http_response
        except ClientAuthenticationError as err:
            raise ARMError(f"{method} {operation}: cannot sign in: {_first_line(err)}") from err
        except AzureError as err:
            raise ARMError(f"{method} {operation}: {_first_line(err)}") from err
        log.debug("azure: %s %s -> %s", method, url, response.status_code)
        return Sent.of(response)


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", None) or err)
    return text.splitlines()[0][:300] if text else type(err).__name__
