"""The kube-apiserver's own count of the requests it served (``apiserver_request_total``), by
verb, resource and subresource: what a daemon asked of it between two reads of its /metrics."""

from __future__ import annotations

import re
from collections import Counter

REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.MULTILINE)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def request_counts(body: str) -> Counter[str]:
    """``{"PATCH services/status": 3000, ...}`` from the apiserver's /metrics text."""
    counts: Counter[str] = Counter()
    for match in REQUEST.finditer(body):
        labels = dict(LABEL.findall(match.group(1)))
        key = labels.get("verb", "?") + " " + labels.get("resource", "?")
        if labels.get("subresource"):
            key += "/" + labels["subresource"]
        counts[key] += int(float(match.group(2)))
    return counts


def request_delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """The requests served between two :func:`request_counts`, the kinds that grew only."""
    return {k: after[k] - before[k] for k in after if after[k] - before[k] > 0}
