"""One vCenter connection: a pyvmomi SOAP session and a vAPI REST session (for tags).

Upstream: ``pkg/common/vclib/connection.go`` and ``connectionmanager.Connect`` (log in,
re-read the credentials on an invalid login and try once more) and ``withTagsClient`` in
``connectionmanager/zones.go`` (a REST session beside the SOAP one).

With a shared session manager in the credentials (upstream ``VSphereConnection.login``) the
SOAP login is ``SessionManager.CloneSession`` with a ticket fetched from it
(:func:`~kccm.providers.vsphere.sharedsession.get_shared_token`), fetched anew on every login,
and the REST client logs in nowhere: it sends the SOAP session's cookie as its session id
(``withTagsClient``: ``c.SessionID(connection.Client.SessionCookie().Value)``).

Every SOAP request the stub sends is counted in the provider's ledger by method name
(:data:`READ_METHODS` read, anything else writes). A ``NotAuthenticated`` fault (session
expired or dropped) logs in again once and repeats the call; a REST ``401`` does the same.
Other failures become :class:`VSphereAPIError` naming the vCenter and the fault, so the
framework backs off and retries; passwords never appear in a message.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from pyVim import connect
from pyVmomi import vim, vmodl

from kccm.cloudprovider import CloudAPICalls, CloudProviderError
from kccm.providers.vsphere.configtypes import VCenter
from kccm.providers.vsphere.credentials import (
    SESSION_MANAGER_TOKEN,
    Credential,
    CredentialStore,
)
from kccm.providers.vsphere.sharedsession import (
    SharedSessionError,
    SharedTokenRefused,
    get_shared_token,
    safe_url,
)

__all__ = ["READ_METHODS", "LoginError", "TagClient", "VCenterSession", "VSphereAPIError"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_smart_stub: Any = connect.SmartStubAdapter  # untyped in pyvmomi
_disconnect: Any = connect.Disconnect

READ_METHODS = frozenset(
    {
        "RetrieveServiceContent",
        "RetrieveProperties",
        "RetrievePropertiesEx",
        "ContinueRetrievePropertiesEx",
        "CancelRetrievePropertiesEx",
        "FindByUuid",
        "FindAllByUuid",
        "FindByDnsName",
        "FindAllByDnsName",
        "FindByIp",
        "FindAllByIp",
        "FindByInventoryPath",
        "FindChild",
        "CurrentTime",
        "Fetch",
        # session and view bookkeeping: no change to the inventory
        "Login",
        "CloneSession",
        "Logout",
        "SessionIsActive",
        "CreateContainerView",
        "DestroyView",
    }
)
"""SOAP methods that change nothing in vCenter (the ledger's reads)."""


class VSphereAPIError(CloudProviderError):
    """A vSphere request failed; ``fault`` is the vSphere fault name (empty for transport)."""

    def __init__(self, message: str, fault: str = "") -> None:
        super().__init__(message)
        self.fault = fault


class LoginError(VSphereAPIError):
    """The vCenter refused the credentials (or they are missing)."""


def _ssl_context(vc: VCenter) -> ssl.SSLContext:
    if vc.insecure or vc.thumbprint:
        # thumbprint pinning is checked by pyvmomi on the connection (it needs no CA)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=vc.ca_file or None)


def _fault_name(err: BaseException) -> str:
    return type(err).__name__.rsplit(".", 1)[-1]


def _describe(vc: VCenter, what: str, err: BaseException) -> VSphereAPIError:
    fault = _fault_name(err)
    if isinstance(err, vim.fault.NoPermission):
        privilege = getattr(err, "privilegeId", "") or "?"
        obj = getattr(err, "object", None)
        target = getattr(obj, "_moId", "") or "?"
        return VSphereAPIError(
            f"vCenter {vc.server}: {what}: permission denied: the user lacks privilege "
            f"{privilege} on {target} (see docs/providers/vsphere.md for the privileges needed)",
            fault,
        )
    if isinstance(err, vmodl.MethodFault):
        detail = getattr(err, "reason", "") or getattr(err, "msg", "") or fault
        return VSphereAPIError(f"vCenter {vc.server}: {what}: {fault}: {detail}", fault)
    if isinstance(err, (TimeoutError, socket.timeout)):
        return VSphereAPIError(f"vCenter {vc.server}: {what}: request timed out", "Timeout")
    return VSphereAPIError(f"vCenter {vc.server}: {what}: {type(err).__name__}: {err}")


class _VCenterClient:
    """What both sessions to one vCenter hold: its settings, credentials, ledger, timeout."""

    def __init__(
        self,
        vc: VCenter,
        credentials: CredentialStore,
        ledger: CloudAPICalls,
        *,
        timeout: float,
    ) -> None:
        self.vc = vc
        self._credentials = credentials
        self._ledger = ledger
        self._timeout = timeout
        self._lock = threading.Lock()
        self._init_state()

    def _init_state(self) -> None:
        """The subclass's own state, set at the end of ``__init__``."""


class VCenterSession(_VCenterClient):
    """A logged-in SOAP session to one vCenter, shared by every thread."""

    def _init_state(self) -> None:
        self._si: Any = None
        self._content: Any = None
        self._generation = 0
        self.logins = 0

    # -- login ---------------------------------------------------------------------------------

    def _record(self, method: str) -> None:
        self._ledger.record(f"{self.vc.tenant_ref}:{method}", mutating=method not in READ_METHODS)

    def _counting_stub(self, stub: Any) -> None:
        invoke = stub.InvokeMethod

        def counted(mo: Any, info: Any, args: Any, outerStub: Any = None) -> Any:
            self._record(str(info.wsdlName))
            return invoke(mo, info, args, outerStub)

        stub.InvokeMethod = counted

    def _authenticate(self, si: Any, cred: Credential) -> str:
        """Log ``si`` in (upstream ``VSphereConnection.login``); who, for the log."""
        manager = si.content.sessionManager
        if not cred.session_manager_url:
            manager.Login(cred.user, cred.password, None)
            return cred.user
        where = safe_url(cred.session_manager_url)
        try:
            ticket = get_shared_token(cred.session_manager_url, cred.session_manager_token)
        except SharedTokenRefused as err:
            raise LoginError(
                f"vCenter {self.vc.server}:{self.vc.port}: shared session manager refused the "
                f"token (secret key '{self.vc.server}.{SESSION_MANAGER_TOKEN}'): {err}",
                "SessionManagerRefused",
            ) from err
        except SharedSessionError as err:
            raise VSphereAPIError(
                f"vCenter {self.vc.server}: login: {err}", "SessionManager"
            ) from err
        manager.CloneSession(ticket)
        return f"a session from the shared session manager {where}"

    def _invalid_login(self, cred: Credential) -> LoginError:
        where = f"vCenter {self.vc.server}:{self.vc.port}"
        if cred.session_manager_url:
            return LoginError(
                f"{where}: CloneSession refused the ticket from the shared session manager "
                f"{safe_url(cred.session_manager_url)}",
                "InvalidLogin",
            )
        return LoginError(
            f"{where}: login failed for user {cred.user!r}: incorrect user name or password",
            "InvalidLogin",
        )

    def _connect(self) -> Any:
        cred = self._credentials.get(self.vc)
        # the API version negotiation reads /sdk/vimServiceVersions.xml
        self._ledger.record(f"{self.vc.tenant_ref}:vimServiceVersions", mutating=False)
        stub: Any = None
        try:
            stub = _smart_stub(
                host=self.vc.server,
                port=self.vc.port,
                sslContext=_ssl_context(self.vc),
                thumbprint=self.vc.thumbprint or None,
                httpConnectionTimeout=self._timeout,
                connectionPoolTimeout=-1,
            )
            self._counting_stub(stub)
            service_instance: Any = vim.ServiceInstance
            si = service_instance("ServiceInstance", stub)
            who = self._authenticate(si, cred)
        except vim.fault.InvalidLogin as err:
            stub.DropConnections()
            raise self._invalid_login(cred) from err
        except VSphereAPIError:
            stub.DropConnections()
            raise
        except (vmodl.MethodFault, OSError, http.client.HTTPException) as err:
            if stub is not None:
                stub.DropConnections()
            raise _describe(self.vc, "login", err) from err
        self.logins += 1
        log.info("vsphere: logged in to vCenter %s as %s", self.vc.server, who)
        return si

    def login(self) -> Any:
        """Log in unless logged in; the ServiceInstance."""
        with self._lock:
            if self._si is None:
                self._si = self._connect()
                self._content = self._si.content
                self._generation += 1
            return self._si

    def _relogin(self, generation: int) -> None:
        """Log in again, unless another thread already did since ``generation``."""
        with self._lock:
            if self._generation != generation:
                return
            old, self._si = self._si, None
            try:
                self._si = self._connect()
                self._content = self._si.content
                self._generation += 1
            finally:  # the dead session's connections go even when the new login fails
                if old is not None:
                    old._stub.DropConnections()

    def _current(self) -> tuple[Any, int]:
        """The ServiceContent and the login it belongs to, read together (a fault from an
        older login must not make a newer one log in again)."""
        with self._lock:
            if self._si is not None:
                return self._content, self._generation
        self.login()
        with self._lock:
            return self._content, self._generation

    def content(self) -> Any:
        """The ServiceContent (read once per login)."""
        return self._current()[0]

    def session_cookie(self) -> tuple[str, int]:
        """The SOAP session's ``vmware_soap_session`` cookie (logging in if needed) and the
        login it belongs to (upstream ``Client.SessionCookie().Value``)."""
        self._current()
        with self._lock:
            si, generation = self._si, self._generation
        if si is None:  # another thread's login failed meanwhile
            return self.session_cookie()
        return str(si._stub.GetSessionId() or ""), generation

    def renew(self, generation: int) -> None:
        """Log in again (a fresh shared session) unless done since ``generation``."""
        self._relogin(generation)

    def call(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(service_content)``; a ``NotAuthenticated`` fault logs in again once."""
        for attempt in (1, 2):
            content, generation = self._current()
            try:
                return fn(content)
            except vim.fault.NotAuthenticated as err:
                if attempt == 2:
                    raise _describe(self.vc, what, err) from err
                log.warning(
                    "vsphere: vCenter %s: session not authenticated during %s; logging in again",
                    self.vc.server,
                    what,
                )
                self._relogin(generation)
            except (vmodl.MethodFault, OSError, http.client.HTTPException) as err:
                raise _describe(self.vc, what, err) from err
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            si, self._si = self._si, None
        if si is not None:
            try:
                self._record("Logout")
                _disconnect(si)
            except Exception as err:  # best effort on shutdown
                log.debug("vsphere: logout from %s: %s", self.vc.server, err)
            finally:
                si._stub.DropConnections()


class TagClient(_VCenterClient):
    """The vAPI tagging REST endpoints of one vCenter (``/rest/com/vmware/cis/...``).

    With a shared session manager in the credentials it uses ``soap``'s session (upstream
    ``withTagsClient``); else a REST session of its own (user and password)."""

    def __init__(
        self,
        vc: VCenter,
        credentials: CredentialStore,
        ledger: CloudAPICalls,
        *,
        timeout: float,
        soap: VCenterSession | None = None,
    ) -> None:
        self._soap = soap
        super().__init__(vc, credentials, ledger, timeout=timeout)

    def _init_state(self) -> None:
        self._context = _ssl_context(self.vc)
        self._token = ""
        self._base = f"https://{self.vc.server}:{self.vc.port}/rest"

    def _send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        op = path.split("?", 1)[0].rsplit("/id:", 1)[0]
        if "~action=" in path:
            op += "?" + path.split("?", 1)[1]
        self._ledger.record(f"{self.vc.tenant_ref}:REST {method} {op}", mutating=False)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self._base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as r:
            payload = r.read()
        return json.loads(payload).get("value") if payload else None

    def _login(self) -> str:
        cred = self._credentials.get(self.vc)
        basic = base64.b64encode(f"{cred.user}:{cred.password}".encode()).decode()
        try:
            token = self._send(
                "POST", "/com/vmware/cis/session", headers={"Authorization": f"Basic {basic}"}
            )
        except urllib.error.HTTPError as err:
            if err.code == 401:
                raise LoginError(
                    f"vCenter {self.vc.server}: REST login failed for user {cred.user!r}",
                    "Unauthorized",
                ) from err
            raise
        return str(token)

    def _session_id(self, what: str) -> tuple[str, int]:
        """The ``vmware-api-session-id`` to send and the SOAP login it is (-1: our own)."""
        if self._soap is not None and self._credentials.get(self.vc).session_manager_url:
            return self._wrap(what, self._soap.session_cookie)
        with self._lock:
            if not self._token:
                self._token = self._wrap(what, self._login)
            return self._token, -1

    def _expire(self, token: str, generation: int) -> None:
        """Drop a session the server no longer knows (log the SOAP one in again)."""
        if generation >= 0 and self._soap is not None:
            self._soap.renew(generation)
            return
        with self._lock:
            if self._token == token:
                self._token = ""

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One authenticated request; a 401 logs in again once."""
        what = f"tagging {method} {path.split('?', 1)[0]}"
        for attempt in (1, 2):
            token, generation = self._session_id(what)
            try:
                return self._send(method, path, body, {"vmware-api-session-id": token})
            except urllib.error.HTTPError as err:
                if err.code == 401 and attempt == 1:
                    self._expire(token, generation)
                    continue
                raise VSphereAPIError(
                    f"vCenter {self.vc.server}: {what}: HTTP {err.code} {err.reason}",
                    f"HTTP{err.code}",
                ) from err
            except (OSError, ValueError) as err:
                raise _describe(self.vc, what, err) from err
        raise AssertionError("unreachable")

    def _wrap(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except urllib.error.HTTPError as err:
            raise VSphereAPIError(
                f"vCenter {self.vc.server}: {what}: HTTP {err.code} {err.reason}"
            ) from err
        except (OSError, ValueError) as err:
            raise _describe(self.vc, what, err) from err
