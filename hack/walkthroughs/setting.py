"""DEVELOPMENT.md, "Adding a setting = one field (+ its flag line)", done literally.

The example: ``RouteControllerOptions.walkthrough_delay`` (a duration, default 0), read by the
route controller, with the flag ``--route-walkthrough-delay`` (kccm's own) in the
``KubeCloudSharedOptions`` group (app/options/shared.py), checked not negative.
"""

from __future__ import annotations

from controller import FLAGS_DOC, OPTION_DEFAULTS, REACH
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
)

ROUTE = "src/kccm/controllers/route.py"
SHARED = "src/kccm/app/options/shared.py"
FLAG_LINE = """        s.duration(
            self.route,
            "walkthrough_delay",
            "route-walkthrough-delay",
            "The walk-through's example setting (a pause; 0 means none).",
        )
"""

STEPS = (
    Step(
        "1",
        "the field, with its default, in the controller's options; the controller reads it",
        (
            Part(
                "the field",
                chain(
                    insert_after(
                        ROUTE,
                        "    max_concurrent_route_operations: int = "
                        "MAX_CONCURRENT_ROUTE_OPERATIONS\n",
                        "    walkthrough_delay: float = 0.0\n",
                    ),
                    insert_after(
                        ROUTE,
                        "self._semaphore = asyncio.Semaphore("
                        "max(1, self.options.max_concurrent_route_operations))\n",
                        '        _log.debug("walk-through delay %ss", '
                        "self.options.walkthrough_delay)\n",
                    ),
                ),
                (REACH,),
            ),
        ),
    ),
    Step(
        "2",
        "one flag line in the group, bound to the controller's object; its check in validate()",
        (
            Part(
                "the flag line",
                chain(
                    insert_before(
                        SHARED, "        s.duration(\n            self.lifecycle,", FLAG_LINE
                    ),
                    replace(
                        SHARED,
                        "from kccm.app.options.checks import (\n    IGNORED,\n    positive,\n)",
                        "from kccm.app.options.checks import (\n    IGNORED,\n    not_negative,\n"
                        "    positive,\n)",
                    ),
                    insert_after(
                        SHARED,
                        '        errors += positive("node-monitor-period", '
                        "self.lifecycle.node_monitor_period)\n",
                        '        errors += not_negative("route-walkthrough-delay", '
                        "self.route.walkthrough_delay)\n",
                    ),
                ),
                (OPTION_DEFAULTS,),
            ),
        ),
    ),
    Step(
        "3",
        "the flag's default in options_support.py, then make flags-doc",
        (
            Part(
                "the default",
                insert_after(
                    "tests/unit/app/options/options_support.py",
                    "KCCM_OWN: dict[str, Any] = {\n",
                    '    "route-walkthrough-delay": 0.0,\n',
                ),
                (OPTION_DEFAULTS,),
            ),
            Part("make flags-doc", run_check_edit(make("flags-doc")), (FLAGS_DOC,)),
        ),
    ),
)

# The flag bound with a parser of another type (an integer parser on a float field).
WRONG_PARSER = replace(
    SHARED,
    '        s.duration(\n            self.route,\n            "walkthrough_delay",',
    '        s.integer(\n            self.route,\n            "walkthrough_delay",',
)

# The flag bound to an attribute of the group instead of the controller's object.
GROUP_ATTRIBUTE = chain(
    replace(
        SHARED,
        '        s.duration(\n            self.route,\n            "walkthrough_delay",',
        '        s.duration(\n            self,\n            "walkthrough_delay",',
    ),
    insert_after(SHARED, '    cloud_config: str = ""\n', "    walkthrough_delay: float = 0.0\n"),
)

WALKTHROUGH = WalkThrough(
    "setting",
    STEPS,
    checks=(
        make("lint"),
        make("typecheck"),
        pytest("tests/unit/app", "tests/unit/controllers/route"),
    ),
    variants=(
        Variant(
            "the flag bound with a parser of another type (integer on a float)",
            WRONG_PARSER,
            (REACH,),
        ),
        # Nothing checks a flag that binds to its group: the value never reaches the
        # controller, and every check passes (DEVELOPMENT.md says so).
        Variant(
            "the flag bound to the group's own attribute",
            GROUP_ATTRIBUTE,
            (REACH, OPTION_DEFAULTS),
            silent=True,
        ),
    ),
)
