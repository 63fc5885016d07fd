"""What the NLB actions share: the API version, the parameters as the SDKs flatten them, the
``ResourceNotFound.<kind>`` errors, tags and the asynchronous jobs.

The SDKs (the Go ``nlb-20220430/v4`` client upstream vendors and the Python
``alibabacloud-nlb20220430``) send every action as ``POST /``, some parameters in the query and
some in a form body, flattened: lists as ``Name.1``, ``Name.2``; lists of objects as
``Tag.1.Key``, ``ZoneMappings.2.VSwitchId``; objects as ``HealthCheckConfig.HealthCheckType``;
booleans as ``true``/``false``; ``ProxyProtocolV2Config`` alone as JSON text. ``RegionId`` is
optional (upstream leaves it out: the endpoint names the region). ``DryRun=true`` answers
``DryRunOperation`` and changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kccm.emulators.alibabacloud.nlbmodel import Job
from kccm.emulators.alibabacloud.rpc import ACTIONS, RpcError, repeated
from kccm.emulators.alibabacloud.world import World

__all__ = [
    "VERSION",
    "flag",
    "integer",
    "kept",
    "nested",
    "not_found",
    "objects",
    "read_jobs",
    "region",
    "register",
    "render_tags",
    "start_job",
    "strings",
    "tags",
]

VERSION = "2022-04-30"
MAX_TAGS = 20
_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def not_found(kind: str, resource_id: str) -> RpcError:
    return RpcError(
        f"ResourceNotFound.{kind}",
        f"The specified resource {kind} [{resource_id}] is not found.",
        404,
    )


def region(world: World, params: Mapping[str, str]) -> str:
    return params.get("RegionId") or world.region


def strings(params: Mapping[str, str], name: str) -> list[str]:
    return repeated(params, name)


def objects(params: Mapping[str, str], name: str) -> list[dict[str, str]]:
    """``Name.N.Field`` parameters as one dict a ``N``, in ``N``'s order."""
    found: dict[int, dict[str, str]] = {}
    prefix = f"{name}."
    for key, value in params.items():
        match = _INDEXED.match(key[len(prefix) :]) if key.startswith(prefix) else None
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [found[index] for index in sorted(found)]


def nested(params: Mapping[str, str], name: str) -> dict[str, str]:
    """``Name.Field`` parameters (``Name.Field.1`` kept as is)."""
    prefix = f"{name}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def flag(params: Mapping[str, str], name: str) -> bool | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() not in ("true", "false"):
        raise RpcError(f"IllegalParam.{name}", f"{name} must be true or false: {raw!r}")
    return raw.lower() == "true"


def integer(params: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if not raw.lstrip("-").isdigit() or not low <= int(raw) <= high:
        raise RpcError(f"IllegalParam.{name}", f"{name} must be {low}..{high}: {raw!r}")
    return int(raw)


def kept(fields: Mapping[str, str]) -> dict[str, str]:
    """Parameters to keep and read back, booleans as ``true``/``false`` (the Python SDK sends
    a flattened object's as ``True``/``False``)."""
    return {k: v.lower() if v in ("True", "False") else v for k, v in fields.items()}


def tags(params: Mapping[str, str]) -> dict[str, str]:
    found = {t.get("Key", ""): t.get("Value", "") for t in objects(params, "Tag")}
    if "" in found:
        raise RpcError("IllegalParam.Tag", "a tag needs a Key")
    if len(found) > MAX_TAGS:
        raise RpcError("QuotaExceeded.TagsPerResource", f"at most {MAX_TAGS} tags a resource")
    return found


def render_tags(items: Mapping[str, str], key: str = "Key", value: str = "Value") -> list[Any]:
    return [{key: k, value: v} for k, v in sorted(items.items())]


def start_job(
    world: World, action: str, resource: str, settle: Callable[[bool], None] | None = None
) -> Job:
    """A job for ``action`` on ``resource``: ``Processing`` for as many reads as the world (or
    the fault met by this call: ``job_reads``, ``job_status="Failed"``) says; settled at once
    when that is none."""
    fault = world.call_fault
    reads = world.nlb.job_reads
    if fault is not None and fault.job_reads >= 0:
        reads = fault.job_reads
    job = Job(world.new_id("job"), action, resource, reads, settle=settle)
    job.fails = fault is not None and fault.job_status == "Failed"
    world.nlb.jobs[job.id] = job
    if reads == 0:
        _settle(job)
    return job


def _settle(job: Job) -> None:
    job.status = "Failed" if job.fails else "Succeeded"
    if job.settle is not None:
        job.settle(not job.fails)


def read_job(job: Job) -> str:
    """One read of ``job``: its status after it."""
    if job.status == "Processing":
        if job.reads > 0:
            job.reads -= 1
        else:
            _settle(job)
    return job.status


def read_jobs(world: World, resource: str) -> None:
    """A look at ``resource``: one read of each job still working on it."""
    for job in world.nlb.pending(resource):
        read_job(job)


def _dry_run(handler: Callable[[World, Mapping[str, str]], dict[str, Any]]) -> Any:
    def call(world: World, params: Mapping[str, str]) -> dict[str, Any]:
        if flag(params, "DryRun"):
            raise RpcError(
                "DryRunOperation", "Request validation has been passed with DryRun flag set."
            )
        return handler(world, params)

    return call


def register(handlers: Mapping[str, Callable[[World, Mapping[str, str]], dict[str, Any]]]) -> None:
    for action, handler in handlers.items():
        ACTIONS[(VERSION, action)] = _dry_run(handler)
