"""DEVELOPMENT.md, "Adding a provider method = one declaration", done literally.

The example: ``LoadBalancer.count_load_balancers(cluster_name) -> int``, a read in the
``load_balancer`` budget group, declared on the Protocol, given its gated twin, and
implemented by every provider whose class serves ``LoadBalancer``: fake, local, aws,
openstack, the example provider and the provider guide's code (vsphere has no load balancer).
"""

from __future__ import annotations

from engine import (
    ROOT,
    Check,
    Part,
    Step,
    Variant,
    WalkThrough,
    chain,
    insert_before,
    make,
    pytest,
    replace,
)

INTERFACE = "src/kccm/cloudprovider/interface.py"
GATED = "src/kccm/cloudprovider/gated.py"
DECLARATION = '''    @provider_call("load_balancer", read=True)
    def count_load_balancers(self, cluster_name: str) -> MaybeAwaitable[int]:
        """The walk-through's example: how many load balancers the cluster has."""
        ...

'''
TWIN = """\
    async def count_load_balancers(self, cluster_name: str, *, priority: Priority = _P) -> int:
        return await self._call(
            "count_load_balancers",
            self.impl.count_load_balancers,
            cluster_name,
            priority=priority,
        )

"""
METHOD = """    def count_load_balancers(self, cluster_name: str) -> int:
        return 0

"""
DELETED = "    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:"
ASYNC_DELETED = "    async " + DELETED.lstrip()
OPENSTACK = "src/kccm/providers/openstack/loadbalancer/balancers.py"

PROVIDER_CALLS = pytest("tests/unit/cloudprovider/test_provider_calls.py")
TYPECHECK = make("typecheck")
GUIDE = pytest("tests/unit/test_provider_guide_types.py")

IMPLEMENTATIONS: list[tuple[str, str, str, tuple[Check, ...]]] = [
    ("fake", "src/kccm/providers/fake/cloud.py", ASYNC_DELETED, (TYPECHECK,)),
    ("local", "src/kccm/providers/local/balancers.py", DELETED, (TYPECHECK,)),
    ("aws", "src/kccm/providers/aws/balancers.py", DELETED, (TYPECHECK,)),
    (
        "the example provider",
        "examples/external-provider/src/kccm_example_provider.py",
        DELETED,
        (TYPECHECK,),
    ),
    ("the provider guide's code", "docs/writing-a-provider.md", DELETED, (GUIDE,)),
]
PENDING: tuple[str, ...] = ()
if (ROOT / OPENSTACK).exists():
    IMPLEMENTATIONS.insert(3, ("openstack", OPENSTACK, DELETED, (TYPECHECK,)))
else:
    PENDING = (
        "openstack: its load balancer is not yet typed (issue 36 moves it to "
        "providers/openstack/loadbalancer/); mypy cannot name it",
    )

STEPS = (
    Step(
        "1",
        "the method, with @provider_call, on its Protocol in cloudprovider/interface.py",
        (
            Part(
                "the declaration",
                insert_before(
                    INTERFACE,
                    '    @provider_call("load_balancer", read=False)\n'
                    "    def ensure_load_balancer(",
                    DECLARATION,
                ),
                (PROVIDER_CALLS,),
            ),
        ),
    ),
    Step(
        "2",
        "its twin in cloudprovider/gated.py",
        (
            Part(
                "the twin",
                insert_before(GATED, "    async def ensure_load_balancer(\n", TWIN),
                (PROVIDER_CALLS,),
            ),
        ),
    ),
    Step(
        "3",
        "implemented in every provider whose class serves the Protocol, and in the guide",
        tuple(
            Part(name, insert_before(path, anchor, METHOD), trips)
            for name, path, anchor, trips in IMPLEMENTATIONS
        ),
    ),
)

NO_MARKER = replace(
    INTERFACE,
    '    @provider_call("load_balancer", read=True)\n    def count_load_balancers(',
    "    def count_load_balancers(",
)

# A provider whose _implements() no longer binds its balancers to LoadBalancer: mypy would
# then not name it when the Protocol grows; test_capability_shapes.py names it instead.
UNBOUND = chain(
    replace(
        "src/kccm/providers/openstack/provider.py",
        ") -> tuple[\n    Interface,\n    LoadBalancer,\n",
        ") -> tuple[\n    Interface,\n",
    ),
    replace(
        "src/kccm/providers/openstack/provider.py",
        "    return (cloud, balancers, balancers, instances,",
        "    return (cloud, balancers, instances,",
    ),
)

WALKTHROUGH = WalkThrough(
    "provider method",
    STEPS,
    checks=(
        make("lint"),
        TYPECHECK,
        pytest("tests/unit/cloudprovider", "tests/unit/test_provider_guide_types.py"),
    ),
    variants=(
        Variant("the declaration without @provider_call", NO_MARKER, (PROVIDER_CALLS,)),
        Variant(
            "openstack's _implements() without its LoadBalancer binding",
            UNBOUND,
            (pytest("tests/unit/providers/test_capability_shapes.py"),),
        ),
    ),
    pending=PENDING,
)
