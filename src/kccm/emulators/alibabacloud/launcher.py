"""Start the Alibaba Cloud emulator as a subprocess and steer it.

``with alibaba_emulator() as emu:`` runs ``python -m kccm.emulators.alibabacloud`` on a loopback
port of its own choosing and yields an :class:`AlibabaEmulator`: ``emu.url`` (the RPC APIs and,
under ``/latest``, the metadata service), ``emu.endpoint_env()`` (upstream's and kccm's
``*_ENDPOINT`` variables and ``ALICLOUD_CLIENT_SCHEME``) and ``emu.admin`` for seeding, faults,
the request log and leak checks.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

from kccm.emulators import CloudEmulator
from kccm.emulators.control import (
    ControlError,
    ControlledEmulator,
    EmulatorControl,
    running,
    start_python_emulator,
)
from kccm.emulators.process import ServingTls

__all__ = [
    "AlibabaAdmin",
    "AlibabaEmulator",
    "AlibabaEmulatorError",
    "alibaba_emulator",
    "start_alibaba",
]


class AlibabaEmulatorError(ControlError):
    """The emulator could not be started or steered."""


@dataclass
class AlibabaAdmin(EmulatorControl):
    """The ``/_emu`` test API (blocking calls): the shared part and Alibaba's own."""

    error = AlibabaEmulatorError
    title = "Alibaba Cloud emulator"

    def add_instance(self, **spec: Any) -> dict[str, Any]:
        """An ECS instance as ``DescribeInstances`` renders it (``spec``: the fields of
        :class:`kccm.emulators.alibabacloud.world.Instance`; ``vpc``, ``vswitch`` and
        ``private_ip`` needed)."""
        return dict(self._call("POST", "/_emu/instances", spec))

    def instance(self, instance_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/_emu/instances/{instance_id}"))

    def set_status(self, instance_id: str, status: str) -> None:
        """``Running``, ``Stopped``, ``Starting``, ``Stopping``."""
        self._call("PUT", f"/_emu/instances/{instance_id}/status", {"status": status})

    def delete_instance(self, instance_id: str) -> None:
        self._call("DELETE", f"/_emu/instances/{instance_id}")

    def add_route_table(self, vpc: str, **spec: Any) -> str:
        """A route table of ``vpc`` (``entries``: ``[{"cidr", "next_hop"}]``); its id."""
        return str(self._call("POST", "/_emu/route-tables", {"vpc": vpc, **spec})["id"])

    def delete_route_table(self, table_id: str) -> None:
        self._call("DELETE", f"/_emu/route-tables/{table_id}")

    def set_metadata_instance(self, instance_id: str) -> None:
        self._call("PUT", "/_emu/metadata-instance", {"id": instance_id})

    def balancer(self, lb_id: str) -> dict[str, Any]:
        """A balancer as ``DescribeLoadBalancerAttribute`` renders it, with ``Listeners`` (as
        ``DescribeLoadBalancerListeners``) and ``VServerGroups`` (with their members)."""
        return dict(self._call("GET", f"/_emu/balancers/{lb_id}"))

    def delete_balancer(self, lb_id: str) -> None:
        """The balancer, its groups and domain extensions gone, whatever its protection."""
        self._call("DELETE", f"/_emu/balancers/{lb_id}")

    def add_eip(self, ip: str, lb: str = "") -> str:
        """An EIP (bound to the balancer ``lb``); its allocation ID."""
        return str(self._call("POST", "/_emu/eips", {"ip": ip, "lb": lb})["id"])

    def delete_eip(self, eip_id: str) -> None:
        self._call("DELETE", f"/_emu/eips/{eip_id}")

    def add_certificate(self, cert_id: str, *, expire_ms: int, common_name: str = "") -> str:
        """A server certificate ``DescribeServerCertificates`` lists (expiring at
        ``expire_ms``, Unix milliseconds)."""
        body = {"id": cert_id, "expire_ms": expire_ms, "common_name": common_name}
        return str(self._call("POST", "/_emu/certificates", body)["id"])

    def delete_certificate(self, cert_id: str) -> None:
        self._call("DELETE", f"/_emu/certificates/{cert_id}")

    def set_health(self, server_id: str, status: str) -> None:
        """``DescribeHealthStatus`` gives ``status`` (``normal``, ``abnormal``) for the
        server's members on running listeners."""
        self._call("PUT", f"/_emu/health/{server_id}", {"status": status})

    def nlb(self, lb_id: str) -> dict[str, Any]:
        """An NLB as ``GetLoadBalancerAttribute`` renders it (tags as ``Key``/``Value``), with
        ``Listeners`` (as ``ListListeners``) and the ``ServerGroups`` they use (as
        ``ListServerGroups``, with their ``Servers``). It reads no job."""
        return dict(self._call("GET", f"/_emu/nlb/{lb_id}"))

    def delete_nlb(self, lb_id: str) -> None:
        """The NLB and its listeners gone, whatever its protection."""
        self._call("DELETE", f"/_emu/nlb/{lb_id}")

    def delete_server_group(self, group_id: str) -> None:
        """The NLB server group (and the listeners using it) gone."""
        self._call("DELETE", f"/_emu/nlb-server-groups/{group_id}")

    def set_job_reads(self, reads: int) -> None:
        """How many reads a new NLB job answers ``Processing`` before it settles (1 at start;
        0: every job settles at once)."""
        self._call("PUT", "/_emu/nlb-job-reads", {"reads": reads})

    def fault(self, action: str, **spec: Any) -> dict[str, Any]:
        """The next ``times`` calls of ``action`` (``nlb:Action``: the NLB's only) answer
        ``code`` with ``status``, or (no ``code``; NLB writes) start a job answering
        ``Processing`` ``job_reads`` times and then ``job_status``
        (:class:`kccm.emulators.alibabacloud.world.Fault`)."""
        return dict(self._call("POST", "/_emu/faults", {"action": action, **spec}))

    def mutating(self, since: int = 0) -> list[dict[str, Any]]:
        """The RPC calls after ``since`` that are no ``Describe*``/``List*``/``Get*`` read."""
        return [
            r
            for r in self.requests(since)
            if r["service"] != "metadata" and not r["path"].startswith(("Describe", "List", "Get"))
        ]


@dataclass(eq=False)
class AlibabaEmulator(ControlledEmulator[AlibabaAdmin]):
    """A running emulator process."""

    def control(self, base_url: str, ca_file: str) -> AlibabaAdmin:
        return AlibabaAdmin(base_url, ca_file)

    def endpoint_env(self) -> dict[str, str]:
        """The environment that points upstream's binary and kccm's provider here."""
        parsed = urllib.parse.urlsplit(self.base_url)
        host = parsed.netloc
        env = {f"{p}_ENDPOINT": host for p in ("ECS", "VPC", "SLB", "NLB")}
        env["METADATA_ENDPOINT"] = self.base_url
        if parsed.scheme == "http":
            env["ALICLOUD_CLIENT_SCHEME"] = "HTTP"
        return env


def _implements(emulator: AlibabaEmulator) -> CloudEmulator:
    """Never called: mypy checks that :class:`AlibabaEmulator` has the shape."""
    return emulator


def start_alibaba(
    *,
    region: str = "cn-hangzhou",
    page_size: int = 100,
    host: str = "127.0.0.1",
    log_path: str | os.PathLike[str] | None = None,
    tls: ServingTls | None = None,
) -> AlibabaEmulator:
    started = start_python_emulator(
        "kccm.emulators.alibabacloud",
        ["--port", "0", "--host", host, "--region", region, "--page-size", str(page_size)],
        name="the Alibaba Cloud emulator",
        error=AlibabaEmulatorError,
        tls=tls,
        log_path=log_path,
    )
    return AlibabaEmulator(
        process=started.process, base_url=str(started.ready["url"]), ca_file=started.ca_file
    )


def alibaba_emulator(**opts: Any) -> contextlib.AbstractContextManager[AlibabaEmulator]:
    """A running emulator for the block (``opts``: ``region``, ``page_size``, ``host``,
    ``log_path``, ``tls``)."""
    return running(start_alibaba, **opts)
