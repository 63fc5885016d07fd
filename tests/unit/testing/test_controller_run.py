"""kccm.testing.controllers: eventually() and one controller run (on FakeKube)."""

from __future__ import annotations

import asyncio

import pytest

from kccm.kube.fake import FakeKube
from kccm.kube.resources import CONFIG_MAPS, EVENTS, NODES
from kccm.providers.fake import FakeCloud
from kccm.testing.controllers import (
    absent,
    all_absent,
    controller_run,
    event_counts,
    event_summaries,
    eventually,
    initialised_nodes,
)
from kccm.testing.kubelet import kubelet_node


async def test_eventually_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, "", "ready"])

    async def probe() -> str | None:
        return next(answers)

    assert await eventually(probe, 5, interval=0) == "ready"


async def test_eventually_times_out() -> None:
    async def never() -> bool:
        return False

    with pytest.raises(TimeoutError):
        await eventually(never, 0.05, interval=0.01)


@pytest.mark.parametrize(
    ("existing", "names", "gone"),
    [
        pytest.param([], ["a", "b"], True, id="none-exist"),
        pytest.param(["b"], ["a", "b"], False, id="one-remains"),
        pytest.param(["a"], [], True, id="no-names"),
    ],
)
async def test_absent_answers_whether_the_objects_are_gone(
    existing: list[str], names: list[str], gone: bool
) -> None:
    kube = FakeKube()
    for name in existing:
        await kube.create(CONFIG_MAPS, {"metadata": {"name": name, "namespace": "ns"}})
    assert await all_absent(kube, CONFIG_MAPS, names, "ns") is gone
    for name in names:
        assert await absent(kube, CONFIG_MAPS, name, "ns") is (name not in existing)
    assert await absent(kube, CONFIG_MAPS, "b", "other-ns"), "another namespace's object"


class Crashing:
    def __init__(self) -> None:
        self.stops: list[float] = []

    async def run(self) -> None:
        raise RuntimeError("crashed at start")

    async def stop(self, grace: float = 30.0) -> bool:
        self.stops.append(grace)
        return True


class Forever:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()

    async def run(self) -> None:
        await self.stopping.wait()

    async def stop(self, grace: float = 30.0) -> bool:
        self.stopping.set()
        return True


async def test_a_run_stops_its_controllers_once_and_reraises_a_crash() -> None:
    crashing, forever = Crashing(), Forever()
    async with controller_run(FakeKube(), FakeCloud(), cluster_name="c1", grace=0.5) as run:
        assert run.context.cluster_name == "c1"
        run.start(crashing, forever)
        with pytest.raises(RuntimeError, match="crashed at start"):
            await run.stop()  # early: the block's end stops (and raises) nothing more
    assert crashing.stops == [0.5]
    assert forever.stopping.is_set()
    assert all(task.done() for task in run.tasks)


async def test_a_builder_that_declined_is_refused() -> None:
    async with controller_run(FakeKube(), FakeCloud()) as run:
        with pytest.raises(ValueError, match="returned None"):
            run.start(None)


async def test_event_counts_fold_repeats_per_reason_of_one_component() -> None:
    kube = FakeKube()
    for i, (component, reason, count) in enumerate(
        [
            ("svc", "Ensured", 2),
            ("svc", "Ensured", None),
            ("svc", "Ensuring", 1),
            ("x", "Ensured", 5),
        ]
    ):
        event = {
            "metadata": {"name": f"e{i}", "namespace": "ns"},
            "involvedObject": {"name": "web"},
            "reason": reason,
            "source": {"component": component},
        }
        if count is not None:
            event["count"] = count
        await kube.create(EVENTS, event)
    assert await event_counts(kube, "ns", "web", "svc") == {"Ensured": 3, "Ensuring": 1}


async def test_event_summaries_project_component_type_reason_message() -> None:
    """(FakeKube ignores the involvedObject field selector: the real apiserver applies it.)"""
    kube = FakeKube()
    for i, source in enumerate([{"component": "svc"}, None]):
        await kube.create(
            EVENTS,
            {
                "metadata": {"name": f"e{i}", "namespace": "ns"},
                "involvedObject": {"name": "web"},
                "type": "Normal",
                "reason": f"R{i}",
                "message": f"m{i}",
                **({"source": source} if source is not None else {}),
            },
        )
    assert await event_summaries(kube, "ns", "web") == [
        ("svc", "Normal", "R0", "m0"),
        ("", "Normal", "R1", "m1"),  # no source: an events.k8s.io writer
    ]


def _initialised(name: str, **changes: object) -> dict[str, object]:
    node = kubelet_node(name)
    node["spec"] = {"providerID": f"fake://{name}", "taints": []}
    node["status"]["addresses"].append({"type": "InternalIP", "address": "10.0.0.1"})
    for path, value in changes.items():
        where, key = path.split("__")
        node[where][key] = value
    return node


@pytest.mark.parametrize(
    ("second", "done"),
    [
        pytest.param({}, True, id="both-initialised"),
        pytest.param({"spec__providerID": ""}, False, id="no-provider-id"),
        pytest.param({"spec__taints": kubelet_node("x")["spec"]["taints"]}, False, id="tainted"),
        pytest.param({"status__addresses": []}, False, id="no-internal-ip-yet"),
    ],
)
async def test_initialised_nodes_waits_for_every_node(
    second: dict[str, object], done: bool
) -> None:
    kube = FakeKube()
    await kube.create(NODES, _initialised("a"))
    await kube.create(NODES, _initialised("b", **second))
    nodes = await initialised_nodes(kube, ["a", "b"])
    assert (nodes is not None) is done
    if nodes is not None:
        assert [n["metadata"]["name"] for n in nodes] == ["a", "b"]
