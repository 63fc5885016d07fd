"""The OpenStack API as the provider uses it: one keystoneauth1 Session, thin REST calls per
service, error mapping and the call ledger.

Why keystoneauth1 and not openstacksdk: keystoneauth is what every OpenStack client builds on
(token renewal, the catalog, regions, interfaces, TLS), it imports in a fraction of the time,
and it leaves the request shapes to us, which must be OCCM's (gophercloud's) exactly: a fully
populated load balancer create, the batch member ``PUT``, no Nova microversion.

Authentication follows ``client.NewOpenStackClient`` (``pkg/client/client.go`` v1.36.0):

- ``trust-id``: a v3 password auth scoped to the trust, as the trustee (``trustee-id`` and
  ``trustee-password`` when set, else ``user-id``/``password``);
- ``application-credential-id`` or ``-name`` with ``-secret``: v3 application credential;
- ``token``: v3 token auth;
- otherwise v3 password (user by ID or by name and user domain), scoped to the project
  (``tenant-id`` or ``tenant-name`` + ``tenant-domain-*``), or to ``domain-*`` without one;
  ``domain-id``/``-name`` also stand for an unset user or project domain (gophercloud/utils
  ``clientconfig``).

``auth-url`` is the Keystone URL; ``/v3`` is appended unless it already ends with it
(gophercloud discovers the version instead). The catalog is read with the ``os-endpoint-type``
interface (``public`` by default) in ``[Global] region``. ``ca-file``, ``cert-file``/``key-file``
and ``tls-insecure`` configure TLS as upstream; ``[Metadata] request-timeout`` is the timeout of
every request (``NewOpenStack``: ``provider.HTTPClient.Timeout``).

Tokens are keystoneauth's business: a token about to expire is renewed before use, and a
``401`` (a token revoked or expired early) makes the Session re-authenticate and send the
request once more (``allow_reauth``), as gophercloud's ``AllowReauth`` does.

Errors: ``404`` -> :class:`OpenStackNotFound`, ``409`` -> :class:`OpenStackConflict`,
``429``/``503`` (and Nova's ``413`` "over limit" with a ``Retry-After``) ->
:class:`~kccm.cloudprovider.Throttled` (with ``Retry-After``); a quota refusal (Octavia's
``403`` "Quota has been met", Neutron's ``409`` ``OverQuota`` "Quota exceeded for resources",
Nova's ``403``/``413`` "Quota exceeded" without a ``Retry-After``) ->
:class:`OpenStackQuotaExceeded`; any other ``403`` -> :class:`OpenStackPermissionDenied`
(the policy refuses the user); anything else -> :class:`OpenStackAPIError` (``status`` 0 for a
transport failure). Every request goes
through :meth:`OpenStackAPI.request` and is recorded in :attr:`OpenStackAPI.ledger` (``GET`` a
read, anything else a write) and observed in OCCM's ``openstack_api_*`` metrics
(:mod:`kccm.providers.openstack.metrics`); Keystone's own token requests are not.

Credentials are never logged: keystoneauth's, requests' and urllib3's loggers are capped at
INFO (their DEBUG output carries request bodies and headers), and secrets never enter kccm's
messages.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import requests
import requests.adapters
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from keystoneauth1.identity import v3

from kccm import __version__
from kccm.cloudprovider import (
    CloudProviderError,
    CloudProviderInitError,
    PermissionDenied,
    QuotaExceeded,
    Throttled,
)
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.cloudprovider.useragent import user_agent
from kccm.providers.openstack.config import GlobalOpts, OpenStackConfig
from kccm.providers.openstack.metrics import OpenStackMetrics

__all__ = [
    "SERVICES",
    "OpenStackAPI",
    "OpenStackAPIError",
    "OpenStackAuthError",
    "OpenStackConflict",
    "OpenStackError",
    "OpenStackNotFound",
    "OpenStackPermissionDenied",
    "OpenStackQuotaExceeded",
    "auth_plugin",
    "is_quota_text",
    "keystone_v3_url",
    "mapped_error",
]

log = logging.getLogger(__name__)

SERVICES = ("compute", "network", "load-balancer")
"""Catalog service types the provider calls."""
THROTTLED_STATUSES = (429, 503)
USER_AGENT = f"kccm/{__version__} openstack-cloud-controller-manager-compatible"
POOL_SIZE = 32
"""HTTP connections kept per host (the framework's thread pool calls concurrently)."""


class OpenStackError(CloudProviderError):
    """An OpenStack call failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class OpenStackNotFound(OpenStackError):
    """``404``: the resource does not exist."""


class OpenStackConflict(OpenStackError):
    """``409``: e.g. an Octavia load balancer that is immutable (``PENDING_*``)."""


class OpenStackAPIError(OpenStackError):
    """Any other failure: ``OpenStackAPIError(status, message)``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, status)


class OpenStackQuotaExceeded(OpenStackAPIError, QuotaExceeded):
    """A quota refused the request (Octavia ``403``, Neutron ``409`` ``OverQuota``, Nova
    ``403``/``413``): see :func:`is_quota_text`."""


class OpenStackPermissionDenied(OpenStackAPIError, PermissionDenied):
    """``403`` for anything but a quota: the cloud's policy refuses the user kccm runs as."""


_QUOTA_TEXT = re.compile(
    r"quota (?:exceeded|has been met|limit)|over ?quota|exceeds? (?:the )?quota|over limit",
    re.IGNORECASE,
)


def is_quota_text(text: str) -> bool:
    """Whether an error message is a quota refusal (Octavia "Quota has been met for
    resources", Neutron "Quota exceeded for resources", Nova "Quota exceeded for ...")."""
    return _QUOTA_TEXT.search(text) is not None


class OpenStackAuthError(OpenStackError, CloudProviderInitError):
    """Keystone refused the credentials, or the catalog lacks a service in the region."""


def _quiet_loggers() -> None:
    for name in ("keystoneauth", "keystoneauth1", "requests", "urllib3"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


def keystone_v3_url(auth_url: str) -> str:
    """``auth-url`` as the Identity v3 URL: ``/v3`` appended unless already there."""
    url = auth_url.strip().rstrip("/")
    if url.endswith("/v3"):
        return url
    return url.removesuffix("/v2.0") + "/v3"


def _domains(glob: GlobalOpts) -> dict[str, str | None]:
    """User and project domains, ``domain-*`` standing in for the unset ones."""
    user_set = glob.user_domain_id or glob.user_domain_name
    project_set = glob.tenant_domain_id or glob.tenant_domain_name
    return {
        "user_domain_id": glob.user_domain_id or (None if user_set else glob.domain_id) or None,
        "user_domain_name": glob.user_domain_name
        or (None if user_set else glob.domain_name)
        or None,
        "project_domain_id": glob.tenant_domain_id
        or (None if project_set else glob.domain_id)
        or None,
        "project_domain_name": glob.tenant_domain_name
        or (None if project_set else glob.domain_name)
        or None,
    }


def _scope(glob: GlobalOpts, domains: Mapping[str, str | None]) -> dict[str, Any]:
    if glob.tenant_id or glob.tenant_name:
        return {
            "project_id": glob.tenant_id or None,
            "project_name": None if glob.tenant_id else glob.tenant_name,
            "project_domain_id": domains["project_domain_id"],
            "project_domain_name": domains["project_domain_name"],
        }
    if glob.domain_id or glob.domain_name:
        return {"domain_id": glob.domain_id or None, "domain_name": glob.domain_name or None}
    return {}


def _user(glob: GlobalOpts, domains: Mapping[str, str | None]) -> dict[str, Any]:
    return {
        "user_id": glob.user_id or None,
        "username": None if glob.user_id else (glob.username or None),
        "user_domain_id": domains["user_domain_id"],
        "user_domain_name": domains["user_domain_name"],
    }


def auth_plugin(glob: GlobalOpts) -> v3.Auth:
    """The keystoneauth v3 plugin for ``[Global]`` (``NewOpenStackClient``'s choice)."""
    url = keystone_v3_url(glob.auth_url)
    domains = _domains(glob)
    if glob.trust_id:
        return v3.Password(
            url,
            user_id=glob.trustee_id or glob.user_id or None,
            username=None if (glob.trustee_id or glob.user_id) else (glob.username or None),
            user_domain_id=domains["user_domain_id"],
            user_domain_name=domains["user_domain_name"],
            password=glob.trustee_password or glob.password,
            trust_id=glob.trust_id,
        )
    if glob.application_credential_secret and (
        glob.application_credential_id or glob.application_credential_name
    ):
        return v3.ApplicationCredential(
            url,
            application_credential_secret=glob.application_credential_secret,
            application_credential_id=glob.application_credential_id or None,
            application_credential_name=None
            if glob.application_credential_id
            else glob.application_credential_name,
            **_user(glob, domains),
        )
    if glob.token:
        return v3.Token(url, token=glob.token, **_scope(glob, domains))
    return v3.Password(url, password=glob.password, **_user(glob, domains), **_scope(glob, domains))


def _verify(glob: GlobalOpts) -> bool | str:
    if glob.insecure:
        return False
    if glob.ca_file:
        return glob.ca_file
    if glob.ca_file_contents:
        with tempfile.NamedTemporaryFile(
            "w", prefix="kccm-openstack-ca-", suffix=".pem", delete=False
        ) as handle:
            handle.write(glob.ca_file_contents)
        return handle.name
    return True


def _http_session() -> requests.Session:
    http = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=8, pool_maxsize=POOL_SIZE)
    http.mount("http://", adapter)
    http.mount("https://", adapter)
    return http


def _error_message(response: requests.Response) -> str:
    """The message of Nova (``{"itemNotFound": {"message"}}``), Neutron
    (``{"NeutronError": {"message"}}``), Octavia (``{"faultstring"}``) or Keystone
    (``{"error": {"message"}}``) error bodies; else the body's text, shortened."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason or ""
    if isinstance(body, dict):
        if isinstance(body.get("faultstring"), str):
            return str(body["faultstring"])
        for value in body.values():
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return str(body)[:300]


def _retry_after(response: requests.Response) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def mapped_error(status: int, text: str, retry_after: float | None = None) -> Exception:
    """The exception for an HTTP ``status`` outside the accepted ones (see the module doc)."""
    if status == 404:
        return OpenStackNotFound(text, 404)
    if status in THROTTLED_STATUSES or (status == 413 and retry_after is not None):
        return Throttled(f"OpenStack rate limit or overload: {text}", retry_after)
    if status in (403, 409, 413) and is_quota_text(text):
        return OpenStackQuotaExceeded(status, f"OpenStack quota exceeded: {text}")
    if status == 409:
        return OpenStackConflict(text, 409)
    if status == 403:
        return OpenStackPermissionDenied(status, f"OpenStack permission denied: {text}")
    return OpenStackAPIError(status, text)


class OpenStackAPI:
    """One authenticated keystoneauth Session and the catalog endpoints of one region."""

    def __init__(self, config: OpenStackConfig, *, session: ksa_session.Session | None = None):
        _quiet_loggers()
        glob = config.global_
        self.config = config
        self.region = glob.region
        self.interface = glob.endpoint_interface
        self.auth_url = keystone_v3_url(glob.auth_url)
        self.ledger = CloudAPICalls()
        self.metrics = OpenStackMetrics()
        cert = (glob.cert_file, glob.key_file) if glob.cert_file and glob.key_file else None
        self.session = session or ksa_session.Session(
            auth=auth_plugin(glob),
            session=_http_session(),
            verify=_verify(glob),
            cert=cert,
            timeout=config.metadata.timeout,
            user_agent=user_agent(USER_AGENT),
        )
        self._endpoints: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- start-up ---------------------------------------------------------------------------

    def verify(self, services: tuple[str, ...] = SERVICES) -> None:
        """Authenticate and find every service in the catalog: refused credentials or a
        region without the services raise :class:`OpenStackAuthError` (one line, no secret);
        an unreachable Keystone raises :class:`OpenStackAPIError` with status 0."""
        try:
            self.session.get_token()
        except ksa_exc.Unauthorized as err:
            raise OpenStackAuthError(
                f"openstack: Keystone at {self.auth_url} refused the [Global] credentials "
                f"(HTTP 401: {_ksa_message(err)})",
                401,
            ) from err
        except ksa_exc.HttpError as err:
            raise OpenStackAuthError(
                f"openstack: authentication at {self.auth_url} failed (HTTP {err.http_status}: "
                f"{_ksa_message(err)})",
                err.http_status or 0,
            ) from err
        except (ksa_exc.ConnectionError, ksa_exc.RequestTimeout) as err:
            raise OpenStackAPIError(0, f"openstack: cannot reach {self.auth_url}: {err}") from err
        for service in services:
            self.endpoint(service)

    def endpoint(self, service: str) -> str:
        """The catalog URL of ``service`` in the region (cached)."""
        with self._lock:
            found = self._endpoints.get(service)
        if found:
            return found
        try:
            url = self.session.get_endpoint(
                service_type=service, interface=self.interface, region_name=self.region or None
            )
        except ksa_exc.Unauthorized as err:
            raise OpenStackAuthError(
                f"openstack: Keystone refused the credentials: {_ksa_message(err)}", 401
            ) from err
        except ksa_exc.EndpointNotFound as err:
            raise OpenStackAuthError(self._no_endpoint(service)) from err
        except ksa_exc.ClientException as err:
            raise OpenStackAPIError(0, f"openstack: cannot read the catalog: {err}") from err
        if not url:
            raise OpenStackAuthError(self._no_endpoint(service))
        self._check_one_region(service)
        with self._lock:
            self._endpoints[service] = str(url).rstrip("/")
        return str(url).rstrip("/")

    def _check_one_region(self, service: str) -> None:
        """Without ``[Global] region`` gophercloud refuses a service found in several regions
        (``ErrMultipleMatchingEndpointsV3``); so does kccm, naming them."""
        if self.region:
            return
        regions = self._catalog_regions(service)
        if len(regions) > 1:
            raise OpenStackAuthError(
                f"openstack: the catalog has {service} in several regions ({', '.join(regions)}): "
                "set [Global] region"
            )

    def _no_endpoint(self, service: str) -> str:
        regions = self._catalog_regions(service)
        has = f"; the catalog has it in: {', '.join(regions)}" if regions else ""
        return (
            f"openstack: no {service} endpoint (interface {self.interface}) in region "
            f"{self.region or '(any)'!r} of the service catalog ([Global] region, "
            f"os-endpoint-type){has}"
        )

    def _catalog_regions(self, service: str) -> list[str]:
        try:
            access = self.session.auth.get_access(self.session)  # type: ignore[union-attr]
            catalog = access.service_catalog.normalize_catalog()
        except Exception:  # only decorates the message
            return []
        regions = {
            str(ep.get("region_id") or ep.get("region"))
            for entry in catalog
            if entry.get("type") == service
            for ep in entry.get("endpoints", ())
        }
        return sorted(regions)

    # -- requests ---------------------------------------------------------------------------

    def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        operation: str,
        ok: tuple[int, ...] = (200, 201, 202, 204),
    ) -> Any:
        """Send ``method`` to the ``service`` endpoint + ``path``; the decoded JSON answer
        (``None`` when there is no body). A status outside ``ok`` raises (see module doc)."""
        url = path if path.startswith(("http://", "https://")) else self.endpoint(service) + path
        return self._send(service, method, url, json=json, params=params, op=operation, ok=ok)

    def _send(
        self,
        service: str,
        method: str,
        url: str,
        *,
        json: Any,
        params: Mapping[str, Any] | None,
        op: str,
        ok: tuple[int, ...],
    ) -> Any:
        self.ledger.record(f"{service}:{op}", mutating=method.upper() != "GET")
        start, failed = time.monotonic(), True
        try:
            answer = self._answer(service, method, url, json=json, params=params, op=op, ok=ok)
            failed = False
            return answer
        finally:
            self.metrics.observe_request(op, time.monotonic() - start, failed)

    def _answer(
        self,
        service: str,
        method: str,
        url: str,
        *,
        json: Any,
        params: Mapping[str, Any] | None,
        op: str,
        ok: tuple[int, ...],
    ) -> Any:
        kwargs: dict[str, Any] = {"raise_exc": False, "connect_retries": 0}
        if json is not None:
            kwargs["json"] = json
        if params:
            kwargs["params"] = dict(params)
        try:
            response = self.session.request(url, method.upper(), **kwargs)
        except ksa_exc.HttpError as err:  # from Keystone, while renewing the token
            status = int(err.http_status or 0)
            raise mapped_error(status, f"{service} {op}: Keystone: {_ksa_message(err)}") from err
        except ksa_exc.ClientException as err:
            raise OpenStackAPIError(0, f"{service} {op}: {err}") from err
        log.debug("openstack: %s %s -> %s", method.upper(), url, response.status_code)
        if response.status_code not in ok:
            text = f"{service} {op}: HTTP {response.status_code}: {_error_message(response)}"
            raise mapped_error(response.status_code, text, _retry_after(response))
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as err:
            raise OpenStackAPIError(
                response.status_code, f"{service} {op}: the answer is not JSON"
            ) from err

    def paged(
        self,
        service: str,
        path: str,
        key: str,
        params: Mapping[str, Any] | None = None,
        *,
        operation: str,
    ) -> Iterator[dict[str, Any]]:
        """Every item under ``key`` across the pages: the ``<key>_links`` ``next`` link is
        followed as gophercloud's ``LinkedPageBase`` follows it."""
        page = self.request(service, "GET", path, params=params, operation=operation)
        while True:
            items = (page or {}).get(key) or ()
            yield from items
            following = _next_link(page, key)
            if not following or not items:
                return
            page = self.request(service, "GET", following, operation=operation)

    def counts(self) -> Mapping[str, int]:
        """Calls made so far per ``service:operation``."""
        snap = self.ledger.snapshot()
        return {**snap.reads, **snap.writes}


def _next_link(page: Any, key: str) -> str:
    if not isinstance(page, dict):
        return ""
    for link in page.get(f"{key}_links") or ():
        if isinstance(link, dict) and link.get("rel") == "next" and link.get("href"):
            return str(link["href"])
    return ""


def _ksa_message(err: Exception) -> str:
    """keystoneauth's message, one line, without its ``(HTTP <status>)`` suffix."""
    message = str(getattr(err, "message", None) or err).splitlines()[0][:300]
    status = getattr(err, "http_status", None)
    return message.removesuffix(f" (HTTP {status})") if status else message
