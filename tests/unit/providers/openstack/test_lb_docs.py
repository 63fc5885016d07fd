"""docs/providers/openstack-loadbalancer.md names every annotation the balancer code reads,
and nothing it does not read."""

from __future__ import annotations

import re
from pathlib import Path

from kccm.providers.openstack.loadbalancer import annotations

DOC = Path(__file__).resolve().parents[4] / "docs" / "providers" / "openstack-loadbalancer.md"
PREFIXES = ("loadbalancer.openstack.org/", "service.beta.kubernetes.io/")


def _read() -> set[str]:
    return {
        getattr(annotations, name)
        for name in annotations.__all__
        if name.isupper() and isinstance(getattr(annotations, name), str)
    }


def _documented() -> set[str]:
    """Every annotation named in full in a code span."""
    spans = re.findall(r"`([^`\s]+)`", DOC.read_text())
    return {span for span in spans if span.startswith(PREFIXES)}


def test_every_annotation_read_is_documented() -> None:
    assert _read() - _documented() == set()


def test_every_annotation_documented_is_read() -> None:
    assert _documented() - _read() == set()
