"""What providers and controllers read of a Node: its name and its providerID."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["node_name", "node_provider_id"]


def node_name(node: Mapping[str, Any]) -> str:
    """``metadata.name`` (``""`` when absent)."""
    return str((node.get("metadata") or {}).get("name") or "")


def node_provider_id(node: Mapping[str, Any]) -> str:
    """``spec.providerID`` (``""`` when the Node has none yet)."""
    return str((node.get("spec") or {}).get("providerID") or "")
