"""The public names of the runtime modules built here: changing them is a deliberate act."""

from __future__ import annotations

import importlib

import pytest

SURFACE = {
    "kccm.runtime.workqueue": ["DelayingQueue", "RateLimitingQueue", "ShutDown", "WorkQueue"],
    "kccm.runtime.ratelimiters": [
        "BucketRateLimiter",
        "ItemExponentialFailureRateLimiter",
        "ItemFastSlowRateLimiter",
        "MaxOfRateLimiter",
        "RateLimiter",
        "WithMaxWaitRateLimiter",
        "default_controller_rate_limiter",
        "default_item_based_rate_limiter",
        "node_controller_rate_limiter",
        "route_controller_rate_limiter",
        "service_controller_rate_limiter",
    ],
    "kccm.runtime.metrics": [
        "NOOP_METRICS",
        "QueueMetrics",
        "WorkqueueMetricsProvider",
        "workqueue_metrics",
    ],
    "kccm.runtime.controller": [
        "Controller",
        "Outcome",
        "Retryable",
        "jitter",
        "retry_delay",
        "sleep_or_stop",
        "until",
        "wait_for_tasks",
    ],
    "kccm.runtime.healthz": ["HealthCheck", "HealthChecks", "HealthResponse", "LoopPulse", "ping"],
    "kccm.runtime.server": ["ENDPOINTS", "Authorizer", "Decision", "Handler", "Server"],
    "kccm.runtime.selfsigned": [
        "CertKey",
        "generate_self_signed",
        "load_or_generate",
        "server_ssl_context",
    ],
    "kccm.runtime.events": [
        "EVENT_TYPE_NORMAL",
        "EVENT_TYPE_WARNING",
        "EventBroadcaster",
        "EventRecorder",
        "ObjectRef",
    ],
    "kccm.runtime.clock": ["REAL_CLOCK", "Clock", "FakeClock", "RealClock"],
}


@pytest.mark.parametrize(
    ("module", "names"), [pytest.param(m, n, id=m) for m, n in SURFACE.items()]
)
def test_public_names(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    assert sorted(imported.__all__) == sorted(names)
    for name in names:
        assert hasattr(imported, name), name
