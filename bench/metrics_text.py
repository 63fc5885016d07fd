"""Figures read from Prometheus text: a daemon's metrics (:func:`metric_sum`,
:func:`cloud_calls`) and the kube-apiserver's own count of the requests it served
(``apiserver_request_total``) by verb, resource and subresource (:func:`request_counts`)."""

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


def metric_sum(body: str, metric: str, **labels: str) -> float:
    total = 0.0
    pattern = re.compile(rf"^{re.escape(metric)}(\{{[^}}]*\}})? (\S+)$", re.MULTILINE)
    for match in pattern.finditer(body):
        text = match.group(1) or ""
        if all(f'{k}="{v}"' in text for k, v in labels.items()):
            total += float(match.group(2))
    return total


def cloud_calls(body: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for match in re.finditer(r'^cloudprovider_calls_total\{method="([^"]+)"\} (\S+)$', body, re.M):
        found[match.group(1)] = float(match.group(2))
    return found


def requests_text(counts: dict[str, int]) -> str:
    """``PATCH services/status 3000, POST events 6000, ...``, the most first."""
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
