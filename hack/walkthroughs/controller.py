"""DEVELOPMENT.md, "Adding a controller = one module + one table row", done literally.

The example: ``dry-run-controller`` (alias ``dry-run``), on by default, with one flag
(``--concurrent-dry-run-syncs``, kccm's own, default 2). It watches Nodes and, for each,
reads a Namespace: a verb kccm does not use yet, so step 7 (RBAC) applies.
"""

from __future__ import annotations

from engine import (
    Part,
    Step,
    Variant,
    WalkThrough,
    chain,
    insert_after,
    insert_before,
    make,
    pytest,
    replace,
    run_check_edit,
    write,
)

MODULE = '''"""``dry-run-controller`` (alias ``dry-run``): the walk-through's example controller.

For every Node it reads the Node's cache entry and the ``kube-system`` Namespace, and logs.
:func:`build` returns None (logged) when the provider has no instances.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kccm.controllers.base import CloudController, ControllerContext
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import NAMESPACES, NODES
from kccm.runtime.informers import EventHandler, Informer, object_key
from kccm.runtime.ratelimiters import default_controller_rate_limiter

__all__ = ["CONTROLLER_ALIAS", "CONTROLLER_NAME", "DryRunController", "DryRunControllerOptions"]

_log = logging.getLogger(__name__)

CONTROLLER_NAME = "dry-run-controller"
CONTROLLER_ALIAS = "dry-run"


@dataclass
class DryRunControllerOptions:
    """``workers``: concurrent syncs."""

    workers: int = 2


def build(
    context: ControllerContext, options: DryRunControllerOptions | None = None
) -> DryRunController | None:
    if not context.has_instances(CONTROLLER_NAME, _log):
        return None
    return DryRunController(context, options or DryRunControllerOptions())


class DryRunController(CloudController):
    def __init__(self, context: ControllerContext, options: DryRunControllerOptions) -> None:
        super().__init__(context, CONTROLLER_NAME, CONTROLLER_ALIAS, _log)
        self.options = options
        self.kube: KubeClient = context.kube
        self.nodes: Informer = context.informers.informer(NODES)
        self.queue = self.work_queue(
            "dryRun",
            default_controller_rate_limiter(clock=context.clock),
            self.sync,
            workers=options.workers,
        )
        self.wait_for_caches(self.nodes)
        self.nodes.add_event_handler(EventHandler(on_add=self._enqueue))

    def _enqueue(self, node: Obj) -> None:
        self.queue.add(object_key(node))

    async def sync(self, name: str) -> None:
        namespace = await self.kube.get(NAMESPACES, "kube-system")
        _log.info("dry run: node %s, namespace %s", name, namespace["metadata"]["name"])
'''

MODULE_TEST = '''"""The walk-through's example controller builds with its options."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import dryrun
from kccm.controllers.base import ControllerContext
from kccm.kube.fake import FakeKube
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory


async def test_it_builds_with_its_workers() -> None:
    kube, gate = FakeKube(), CallGate(registry=CollectorRegistry())
    context = ControllerContext(
        kube,
        SharedInformerFactory(kube),
        GatedCloud(FakeCloud(), gate),
        EventBroadcaster(kube),
        CollectorRegistry(),
    )
    built = dryrun.build(context, dryrun.DryRunControllerOptions(workers=3))
    assert built is not None
    assert built.name == dryrun.CONTROLLER_NAME
    assert built.options.workers == 3
    gate.close()
'''

FLAGS = '''"""The dry-run controller's flags (the walk-through's example)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import ManagerConfig
from kccm.app.flags import FlagSet
from kccm.app.options.checks import positive
from kccm.controllers.dryrun import DryRunControllerOptions


@dataclass
class DryRunControllerFlags:
    """Section "dry-run-controller": binds to the controller's own options."""

    dry_run: DryRunControllerOptions = field(default_factory=DryRunControllerOptions)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("dry-run-controller")
        s.integer(
            self.dry_run,
            "workers",
            "concurrent-dry-run-syncs",
            "Number of workers of the dry-run controller (the walk-through's example).",
        )

    def validate(self) -> list[str]:
        return positive("concurrent-dry-run-syncs", self.dry_run.workers)

    def apply_to(self, config: ManagerConfig) -> None:
        return None  # the flags write the controller's options directly
'''

TABLE = "src/kccm/controllers/table.py"
OPTIONS = "src/kccm/app/options"
KCCM = f"{OPTIONS}/kccm.py"
DEFAULTS = "tests/unit/app/options/test_options_defaults.py"

RBAC_RULE = """  - apiGroups: [""]
    resources: [namespaces]
    verbs: [get]
"""
SERVICES_RULE = '  - apiGroups: [""]\n    resources: [services]\n'

INDEPENDENCE = pytest("tests/unit/controllers/test_independence_contract.py")
REACH = pytest("tests/unit/app/options/test_options_reach_controllers.py")
OPTION_DEFAULTS = pytest("tests/unit/app/options/test_options_defaults.py")
FLAGS_DOC = pytest("tests/unit/app/test_cli.py::test_flags_doc_is_current")
RBAC = pytest("tests/unit/test_deploy_rbac.py")
CHART = pytest("tests/unit/test_deploy_chart.py")

STEPS = (
    Step(
        "1",
        "the module, with its options dataclass, build() and tests",
        (
            Part(
                "the module",
                chain(
                    write("src/kccm/controllers/dryrun.py", MODULE),
                    write("tests/unit/controllers/test_dryrun.py", MODULE_TEST),
                ),
                (pytest("tests/unit/controllers/test_table.py"),),
            ),
        ),
    ),
    Step(
        "2",
        "one row of CONTROLLERS and one field of ControllerOptions",
        (
            Part(
                "the row",
                chain(
                    replace(
                        TABLE,
                        "from kccm.controllers import node, nodelifecycle,",
                        "from kccm.controllers import dryrun, node, nodelifecycle,",
                    ),
                    insert_before(
                        TABLE,
                        "\n\n\nclass RunnableController(Protocol):",
                        "\n    dry_run: dryrun.DryRunControllerOptions = "
                        "field(default_factory=dryrun.DryRunControllerOptions)",
                    ),
                    insert_before(
                        TABLE,
                        ")\nBY_NAME: dict[str, ControllerSpec]",
                        "    ControllerSpec(\n        dryrun.CONTROLLER_NAME,\n"
                        '        dryrun.CONTROLLER_ALIAS,\n        "dry-run-controller",\n'
                        "        lambda context, options: dryrun.build(context, options.dry_run),\n"
                        "    ),\n",
                    ),
                ),
                (INDEPENDENCE,),
            ),
        ),
    ),
    Step(
        "3",
        'the module in the "cloud controllers do not import each other" contract',
        (
            Part(
                "the contract entry",
                insert_before(
                    "pyproject.toml",
                    '    "kccm.controllers.pvlabel",\n]',
                    '    "kccm.controllers.dryrun",\n',
                ),
                (INDEPENDENCE,),
            ),
        ),
    ),
    Step(
        "4",
        "a flag group, exported, a KccmOptions field built in __post_init__ on the table's object",
        (
            Part(
                "the flag group",
                chain(
                    write(f"{OPTIONS}/dryruncontroller.py", FLAGS),
                    insert_before(
                        f"{OPTIONS}/__init__.py",
                        "from kccm.app.options.gate import GateOptions",
                        "from kccm.app.options.dryruncontroller import DryRunControllerFlags\n",
                    ),
                    insert_after(
                        f"{OPTIONS}/__init__.py",
                        '    "DebuggingOptions",\n',
                        '    "DryRunControllerFlags",\n',
                    ),
                    insert_before(
                        KCCM,
                        "from kccm.app.options.gate import GateOptions",
                        "from kccm.app.options.dryruncontroller import DryRunControllerFlags\n",
                    ),
                    insert_before(
                        KCCM,
                        "    debugging: DebuggingOptions",
                        "    dry_run_controller: DryRunControllerFlags = field(init=False)\n",
                    ),
                ),
                (OPTION_DEFAULTS,),
            ),
            Part(
                "its wiring in __post_init__",
                insert_before(
                    KCCM,
                    "        self.webhook = WebhookOptions(",
                    "        self.dry_run_controller = "
                    "DryRunControllerFlags(dry_run=controllers.dry_run)\n",
                ),
                (OPTION_DEFAULTS,),
            ),
        ),
    ),
    Step(
        "5",
        "the flag's default in options_support.py, then make flags-doc",
        (
            Part(
                "the default",
                insert_after(
                    "tests/unit/app/options/options_support.py",
                    "KCCM_OWN: dict[str, Any] = {\n",
                    '    "concurrent-dry-run-syncs": 2,\n',
                ),
                (OPTION_DEFAULTS,),
            ),
            Part("make flags-doc", run_check_edit(make("flags-doc")), (FLAGS_DOC,)),
        ),
    ),
    Step(
        "6",
        "on by default: its name in ALL_ON and in the default config's set",
        (
            Part(
                "the expected sets",
                chain(
                    replace(
                        DEFAULTS,
                        'ALL_ON = {"cloud-node-controller", "cloud-node-lifecycle-controller", '
                        '"service-lb-controller"}',
                        "ALL_ON = {\n"
                        '    "dry-run-controller",\n'
                        '    "cloud-node-controller",\n'
                        '    "cloud-node-lifecycle-controller",\n'
                        '    "service-lb-controller",\n'
                        "}",
                    ),
                    insert_after(
                        DEFAULTS,
                        "        controllers=frozenset(\n            {\n",
                        '                "dry-run-controller",\n',
                    ),
                ),
                (OPTION_DEFAULTS,),
            ),
        ),
    ),
    Step(
        "7",
        "a verb kccm did not use: deploy/rbac.yaml, the chart, docs/deploy.md's table",
        (
            Part(
                "the table row",
                insert_after(
                    "docs/deploy.md",
                    "(get: the Service `kccm explain` asks about) |\n",
                    "| core | namespaces | get | ClusterRole | `controllers/dryrun.py` (the "
                    "walk-through's example) |\n",
                ),
                (RBAC,),
            ),
            Part(
                "the rule in deploy/rbac.yaml",
                insert_before("deploy/rbac.yaml", SERVICES_RULE, RBAC_RULE),
                (RBAC, CHART),
            ),
            Part(
                "the rule in the chart",
                insert_before("charts/kccm/templates/rbac.yaml", SERVICES_RULE, RBAC_RULE),
                (CHART,),
            ),
        ),
    ),
)

# A flag group written but built with its own default object: its flags parse, the controller
# never sees them. DEVELOPMENT.md says test_options_reach_controllers.py fails then.
OWN_OBJECT = replace(
    KCCM,
    "        self.dry_run_controller = DryRunControllerFlags(dry_run=controllers.dry_run)\n",
    "        self.dry_run_controller = DryRunControllerFlags()\n",
)

# The flag group written and exported but never made a KccmOptions field: its flags are
# never registered (issue 36's silent path; test_options_groups_wired.py catches it).
NOT_A_FIELD = chain(
    replace(KCCM, "    dry_run_controller: DryRunControllerFlags = field(init=False)\n", ""),
    replace(
        KCCM,
        "        self.dry_run_controller = DryRunControllerFlags(dry_run=controllers.dry_run)\n",
        "",
    ),
)

WALKTHROUGH = WalkThrough(
    "controller",
    STEPS,
    checks=(
        make("lint"),
        make("typecheck"),
        pytest(
            "tests/unit/controllers",
            "tests/unit/app",
            "tests/unit/test_deploy_rbac.py",
            "tests/unit/test_deploy_chart.py",
            "tests/unit/test_deploy_manifests.py",
        ),
    ),
    variants=(
        Variant("the flag group built with its own default object", OWN_OBJECT, (REACH,)),
        Variant(
            "the flag group never made a KccmOptions field",
            NOT_A_FIELD,
            (pytest("tests/unit/app/options/test_options_groups_wired.py"),),
        ),
    ),
)
