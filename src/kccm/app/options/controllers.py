"""``--controllers``: upstream's ``IsControllerEnabled`` over the table of controllers
(:data:`kccm.controllers.table.CONTROLLERS`)."""

from __future__ import annotations

from kccm.app.flags import go_quote
from kccm.controllers.table import ALIASES, BY_NAME, CONTROLLERS

__all__ = ["controller_errors", "is_controller_enabled", "resolve_controllers"]

DISABLED_BY_DEFAULT = frozenset(spec.name for spec in CONTROLLERS if not spec.enabled_by_default)


def _canonical(entry: str) -> str:
    """Resolve an alias, keeping a leading ``-`` (upstream ApplyTo)."""
    negated = entry.startswith("-")
    name = entry[1:] if negated else entry
    name = ALIASES.get(name, name)
    return "-" + name if negated else name


def controller_errors(entries: list[str]) -> list[str]:
    """Upstream Validate: every entry but ``*`` must name a known controller or alias."""
    errors = []
    for entry in entries:
        if entry == "*":
            continue
        name = entry.removeprefix("-")
        if ALIASES.get(name, name) not in BY_NAME:
            errors.append(
                f"--controllers: {go_quote(name)} is not in the list of known controllers "
                f"(known: {', '.join(sorted(BY_NAME))}; aliases: "
                f"{', '.join(sorted(ALIASES))})"
            )
    return errors


def is_controller_enabled(
    name: str, disabled_by_default: frozenset[str], entries: list[str]
) -> bool:
    """Upstream ``IsControllerEnabled``: the first explicit ``name``/``-name`` wins; otherwise
    a ``*`` enables every controller that is not disabled by default."""
    star = False
    for entry in entries:
        if entry == name:
            return True
        if entry == "-" + name:
            return False
        star = star or entry == "*"
    return star and name not in disabled_by_default


def resolve_controllers(entries: list[str]) -> frozenset[str]:
    """The canonical names of the controllers ``entries`` enables (aliases resolved)."""
    canonical = [_canonical(entry) for entry in entries]
    return frozenset(
        name for name in BY_NAME if is_controller_enabled(name, DISABLED_BY_DEFAULT, canonical)
    )
