"""What Octavia's wsme types (octavia/api/v2/types/*.py, octavia/api/common/types.py) make of
bodies, where the emulator was found to answer otherwise by the comparison with octavia 19
(tests/integration/openstack/test_emulator_vs_octavia.py): integer bounds and IP addresses
of requests, the fields of responses."""

from __future__ import annotations

import ipaddress
from typing import Any

from kccm.emulators.openstack.errors import EmuError

__all__ = [
    "LISTENER_BOUNDS",
    "MAX_TIMEOUT",
    "MEMBER_BOUNDS",
    "PERSISTENCE_FIELDS",
    "check_bounds",
    "check_ip",
    "check_ips",
    "response_fields",
]

PERSISTENCE_FIELDS = ("type", "cookie_name", "persistence_timeout", "persistence_granularity")
MAX_TIMEOUT = 24 * 24 * 60 * 60 * 1000  # octavia/common/constants.py MAX_TIMEOUT
LISTENER_BOUNDS: dict[str, tuple[int, int | None]] = {  # types' IntegerType(minimum, maximum)
    "connection_limit": (-1, None),
    "timeout_client_data": (0, MAX_TIMEOUT),
    "timeout_member_connect": (0, MAX_TIMEOUT),
    "timeout_member_data": (0, MAX_TIMEOUT),
    "timeout_tcp_inspect": (0, MAX_TIMEOUT),
}

MEMBER_BOUNDS: dict[str, tuple[int, int | None]] = {  # MIN_WEIGHT, MAX_WEIGHT
    "weight": (0, 256),
}


def check_bounds(body: dict[str, Any], bounds: dict[str, tuple[int, int | None]]) -> None:
    """wsme's IntegerType(minimum, maximum) on the fields of ``body`` that are set."""
    for key, (low, high) in bounds.items():
        value = body.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if value < low:
            problem = f"greater or equal to {low}"
        elif high is not None and value > high:
            problem = f"lower or equal to {high}"
        else:
            continue
        raise EmuError(
            400,
            f"Invalid input for field/attribute {key}. Value: '{value}'. Value should be {problem}",
        )


def check_ip(value: Any, name: str) -> None:
    """wsme's IPAddressType (octavia/api/common/types.py)."""
    if value is None:
        return
    try:
        ipaddress.ip_address(str(value))
    except ValueError as exc:
        raise EmuError(
            400,
            f"Invalid input for field/attribute {name}. Value: '{value}'. "
            "Value should be IPv4 or IPv6 format",
        ) from exc


def check_ips(body: dict[str, Any], *keys: str) -> None:
    for key in keys:
        check_ip(body.get(key), key)


def response_fields(kind: str, obj: dict[str, Any], body: dict[str, Any]) -> None:
    """Every ``*Response`` still carries ``tenant_id``, and its tags in the order of the tags
    table's primary key (sorted); ``MemberResponse`` and ``HealthMonitorResponse`` have no
    ``description``; a pool's ``SessionPersistenceResponse`` has all four fields."""
    body["tenant_id"] = obj["project_id"]
    persistence = body.get("session_persistence")
    if isinstance(persistence, dict):
        body["session_persistence"] = {**dict.fromkeys(PERSISTENCE_FIELDS), **persistence}
    if "tags" in body:
        body["tags"] = sorted(body["tags"])
    if kind in ("members", "healthmonitors"):
        body.pop("description", None)
