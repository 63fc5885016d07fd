"""ARM resource ids: ``/subscriptions/{s}/resourceGroups/{g}/providers/{ns}/{type}/{name}``
followed by ``/{child type}/{child name}`` pairs, compared case-insensitively as ARM does."""

from __future__ import annotations

from dataclasses import dataclass

from kccm.emulators.azure.world import Obj, World

__all__ = ["ParsedId", "child_of", "parse_id", "ref", "resolve"]


@dataclass(frozen=True)
class ParsedId:
    subscription: str
    group: str
    namespace: str
    type: str
    name: str
    children: tuple[tuple[str, str], ...]  # (child type, name) pairs below the resource

    @property
    def top(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.group}"
            f"/providers/{self.namespace}/{self.type}/{self.name}"
        )


def parse_id(resource_id: str) -> ParsedId | None:
    """The parts of a resource id, or None when it is not one."""
    segs = resource_id.strip("/").split("/")
    if len(segs) < 8 or len(segs) % 2:
        return None
    if segs[0].lower() != "subscriptions" or segs[2].lower() != "resourcegroups":
        return None
    if segs[4].lower() != "providers":
        return None
    pairs = tuple((segs[i], segs[i + 1]) for i in range(8, len(segs), 2))
    return ParsedId(segs[1], segs[3], segs[5], segs[6], segs[7], pairs)


def child_of(parent: Obj, prop: str, name: str) -> Obj | None:
    """The child ``name`` in ``parent``'s inline array ``prop`` (case-insensitive)."""
    props = parent.get("properties") or {}
    for key, items in props.items():
        if key.lower() == prop.lower() and isinstance(items, list):
            for item in items:
                if str(item.get("name", "")).lower() == name.lower():
                    return dict(item)
    return None


def resolve(world: World, resource_id: str) -> Obj | None:
    """The resource or child a reference names, or None when nothing is there."""
    stored = world.get(resource_id)
    if stored is not None:
        return stored
    parsed = parse_id(resource_id)
    if parsed is None or not parsed.children:
        return None
    current = world.get(parsed.top)
    for prop, name in parsed.children:
        if current is None:
            return None
        current = child_of(current, prop, name)
    return current


def ref(value: object) -> dict[str, str] | None:
    """A sub-resource reference as ARM stores it: only its ``id`` (clients may send the whole
    referenced object)."""
    if isinstance(value, dict) and value.get("id"):
        return {"id": str(value["id"])}
    return None
