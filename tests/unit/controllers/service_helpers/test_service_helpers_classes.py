"""Serving load-balancer classes (``--load-balancer-class``, ``--load-balancer-class-only``):
which Services a kccm wants, and the two extra triggers of a class switch."""

from __future__ import annotations

from typing import Any

import pytest
from service_objects import svc, with_meta

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.controllers.service_predicates import (
    UPSTREAM_CLASSES,
    LoadBalancerClasses,
    lost_finalizer,
    may_hold_released_balancer,
    needs_update,
    wants_load_balancer,
)

A, B = "a.example.com/lb", "b.example.com/lb"
WITH_A = LoadBalancerClasses.of([A])
ONLY_A = LoadBalancerClasses.of([A], class_only=True)
A_AND_B = LoadBalancerClasses.of([A, B])
FIN = [FINALIZER_LB_CLEANUP]

CLASSLESS = svc()
CLASS_A = svc(loadBalancerClass=A)
CLASS_B = svc(loadBalancerClass=B)
EMPTY_CLASS = svc(loadBalancerClass="")
CLUSTER_IP = svc(type="ClusterIP")


@pytest.mark.parametrize(
    ("classes", "service", "wanted"),
    [
        pytest.param(UPSTREAM_CLASSES, CLASSLESS, True, id="default-classless"),
        pytest.param(UPSTREAM_CLASSES, CLASS_A, False, id="default-class-is-someone-elses"),
        pytest.param(UPSTREAM_CLASSES, EMPTY_CLASS, False, id="default-empty-class"),
        pytest.param(WITH_A, CLASSLESS, True, id="with-a-classless"),
        pytest.param(WITH_A, CLASS_A, True, id="with-a-class-a"),
        pytest.param(WITH_A, CLASS_B, False, id="with-a-class-b"),
        pytest.param(WITH_A, EMPTY_CLASS, False, id="with-a-empty-class"),
        pytest.param(WITH_A, svc(type="ClusterIP", loadBalancerClass=A), False, id="with-a-not-lb"),
        pytest.param(ONLY_A, CLASSLESS, False, id="class-only-classless"),
        pytest.param(ONLY_A, CLASS_A, True, id="class-only-class-a"),
        pytest.param(ONLY_A, CLASS_B, False, id="class-only-class-b"),
        pytest.param(ONLY_A, CLUSTER_IP, False, id="class-only-clusterip"),
        pytest.param(A_AND_B, CLASS_B, True, id="two-classes-class-b"),
    ],
)
def test_wants_load_balancer_by_class(
    classes: LoadBalancerClasses, service: dict[str, Any], wanted: bool
) -> None:
    assert wants_load_balancer(service, classes) is wanted


@pytest.mark.parametrize(
    ("classes", "service", "serves"),
    [
        pytest.param(UPSTREAM_CLASSES, CLUSTER_IP, True, id="default-clusterip-class-less"),
        pytest.param(WITH_A, CLUSTER_IP, True, id="with-a-clusterip-class-less"),
        pytest.param(ONLY_A, CLUSTER_IP, False, id="class-only-clusterip-not-ours"),
        pytest.param(ONLY_A, CLASS_A, True, id="class-only-class-a"),
    ],
)
def test_serves_class_ignores_the_type(
    classes: LoadBalancerClasses, service: dict[str, Any], serves: bool
) -> None:
    assert classes.serves_class(service) is serves


DELETING = {"deletionTimestamp": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("classes", "service", "check"),
    [
        pytest.param(
            UPSTREAM_CLASSES, with_meta(CLASS_B, finalizers=FIN), True, id="default-foreign-fin"
        ),
        pytest.param(UPSTREAM_CLASSES, CLASS_B, False, id="default-foreign-without-finalizer"),
        pytest.param(UPSTREAM_CLASSES, with_meta(CLASSLESS, finalizers=FIN), False, id="ours"),
        pytest.param(WITH_A, with_meta(CLASS_A, finalizers=FIN), False, id="with-a-ours"),
        pytest.param(ONLY_A, with_meta(CLASSLESS, finalizers=FIN), True, id="class-only-classless"),
        pytest.param(
            UPSTREAM_CLASSES,
            with_meta(svc(type="ClusterIP"), finalizers=FIN),
            False,
            id="clusterip-is-needs-cleanup-instead",
        ),
        pytest.param(
            UPSTREAM_CLASSES,
            with_meta(CLASS_B, finalizers=FIN, **DELETING),
            False,
            id="deleting-is-needs-cleanup-instead",
        ),
    ],
)
def test_may_hold_released_balancer(
    classes: LoadBalancerClasses, service: dict[str, Any], check: bool
) -> None:
    assert may_hold_released_balancer(service, classes) is check


@pytest.mark.parametrize(
    ("classes", "old", "new", "lost"),
    [
        pytest.param(
            WITH_A, with_meta(CLASS_A, finalizers=FIN), CLASS_A, True, id="ours-lost-finalizer"
        ),
        pytest.param(
            UPSTREAM_CLASSES,
            with_meta(CLASS_A, finalizers=FIN),
            CLASS_A,
            False,
            id="not-ours-lost-finalizer",
        ),
        pytest.param(
            UPSTREAM_CLASSES,
            with_meta(CLASSLESS, finalizers=FIN),
            CLASSLESS,
            False,
            id="default-classless-lost-finalizer-is-upstream",
        ),
        pytest.param(
            WITH_A,
            with_meta(CLASSLESS, finalizers=FIN),
            CLASSLESS,
            True,
            id="with-a-classless-lost-finalizer",
        ),
        pytest.param(WITH_A, CLASS_A, with_meta(CLASS_A, finalizers=FIN), False, id="gained"),
        pytest.param(
            WITH_A,
            with_meta(CLASS_A, finalizers=FIN),
            with_meta(CLASS_A, finalizers=FIN),
            False,
            id="kept",
        ),
    ],
)
def test_lost_finalizer(
    classes: LoadBalancerClasses, old: dict[str, Any], new: dict[str, Any], lost: bool
) -> None:
    assert lost_finalizer(old, new, classes) is lost


@pytest.mark.parametrize(
    ("classes", "old", "new", "update"),
    [
        pytest.param(UPSTREAM_CLASSES, CLASS_A, CLUSTER_IP, False, id="default-class-a-leaves"),
        pytest.param(WITH_A, CLASS_A, CLUSTER_IP, True, id="with-a-class-a-leaves"),
        pytest.param(WITH_A, CLUSTER_IP, CLASS_B, False, id="with-a-class-b-arrives"),
        pytest.param(WITH_A, CLASSLESS, CLASS_B, True, id="with-a-classless-becomes-b"),
        pytest.param(ONLY_A, CLASSLESS, CLUSTER_IP, False, id="class-only-classless-leaves"),
        pytest.param(
            WITH_A,
            CLASS_A,
            svc(loadBalancerClass=A, externalTrafficPolicy="Local"),
            True,
            id="with-a-class-a-changes",
        ),
        pytest.param(
            UPSTREAM_CLASSES,
            CLASS_A,
            svc(loadBalancerClass=A, externalTrafficPolicy="Local"),
            False,
            id="default-class-a-changes",
        ),
    ],
)
def test_needs_update_by_class(
    classes: LoadBalancerClasses, old: dict[str, Any], new: dict[str, Any], update: bool
) -> None:
    assert needs_update(old, new, classes=classes) is update
