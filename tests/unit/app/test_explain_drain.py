"""``kccm explain service``'s drain part (explain_rules.target_drain, explain_text): how a
leaving Node goes for the Service, and which Nodes drain until when."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.app.explain_rules import target_drain
from kccm.app.explain_text import render
from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS


def svc(annotation: str | None) -> dict[str, Any]:
    annotations = {} if annotation is None else {ANNOTATION_DRAIN_SECONDS: annotation}
    return {"metadata": {"name": "s", "namespace": "d", "annotations": annotations}}


EXPLAINED = {
    "nothing-asked": (None, 0, True, 0, "removed at once, as upstream (default)"),
    "annotation": ("30", 0, True, 30, "drains 30s, then is removed (annotation"),
    "flag": (None, 45, True, 45, "drains 45s, then is removed (flag --default-drain-seconds)"),
    "annotation-zero-beats-flag": ("0", 45, True, 0, "removed at once"),
    "provider-without-draining": ("30", 0, False, 0, "provider fake has no draining state"),
    "invalid": ("soon", 0, True, None, 'invalid value "soon"'),
}


@pytest.mark.parametrize(
    ("annotation", "flag", "supported", "seconds", "says"),
    EXPLAINED.values(),
    ids=EXPLAINED.keys(),
)
def test_explain_says_how_a_leaving_node_goes(
    annotation: str | None, flag: int, supported: bool, seconds: int | None, says: str
) -> None:
    answer = target_drain(svc(annotation), flag, supported, "fake", {})
    assert answer["seconds"] == seconds
    assert says in answer["note"]


def test_the_text_names_each_draining_node_and_its_end() -> None:
    drain = target_drain(svc("30"), 0, True, "local", {"c": "2026-01-01T00:00:30+00:00"})
    text = render({"kind": "service", "key": "d/s", "handled": True, "drain": drain})
    assert "  leaving Nodes: a leaving Node drains 30s" in text
    assert "  draining: c until 2026-01-01T00:00:30+00:00" in text
