"""List filters and paging shared by Neutron and Octavia (and Nova's ``limit``/``marker``).

Neutron (neutron/api/v2/base.py ``_get_filters``, neutron/db/_utils.py ``apply_filters``):
every attribute is a query filter, a repeated key matches any of its values, booleans are
``true``/``false`` in any case, tags are filtered by ``tags``/``tags-any``/``not-tags``/
``not-tags-any`` (comma separated), ``fields`` trims the answer, ``limit``/``marker`` page it
with ``<collection>_links``. Octavia (octavia/api/common/pagination.py) does the same for its
attributes, and always answers ``<collection>_links`` (empty when no next page).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from multidict import MultiMapping

from kccm.emulators.openstack.errors import EmuError

__all__ = ["Matcher", "filter_items", "page", "project_fields", "sort_items", "tag_filters_match"]

Obj = dict[str, Any]
Matcher = Callable[[Obj, list[str]], bool]
CONTROL = {"limit", "marker", "fields", "sort_key", "sort_dir", "page_reverse", "sort"}
TAG_KEYS = {"tags", "tags-any", "not-tags", "not-tags-any"}


def _same(value: Any, wanted: str) -> bool:
    if isinstance(value, bool):
        return str(value).lower() == wanted.lower()
    if value is None:
        return wanted in ("", "None", "null")
    return str(value) == wanted


def tag_filters_match(tags: Iterable[str], query: Mapping[str, str]) -> bool:
    have = set(tags)

    def split(key: str) -> set[str]:
        return {t for t in query.get(key, "").split(",") if t}

    if "tags" in query and not split("tags") <= have:
        return False
    if "tags-any" in query and not split("tags-any") & have:
        return False
    if "not-tags" in query and split("not-tags") and split("not-tags") <= have:
        return False
    return not ("not-tags-any" in query and split("not-tags-any") & have)


def filter_items(
    items: Iterable[Obj],
    query: MultiMapping[str],
    special: Mapping[str, Matcher] | None = None,
    *,
    ignore: Sequence[str] = (),
) -> list[Obj]:
    """The items every filter of ``query`` matches; ``special`` handles keys that are not
    plain attribute equality (e.g. Neutron's ``fixed_ips``); unknown keys are ignored, as
    Neutron ignores filters on attributes a resource lacks (when not strict)."""
    special = special or {}
    keys = [k for k in dict.fromkeys(query.keys()) if k not in CONTROL and k not in ignore]
    tag_query = {k: ",".join(query.getall(k)) for k in keys if k in TAG_KEYS}
    result = []
    for item in items:
        if tag_query and not tag_filters_match(item.get("tags") or (), tag_query):
            continue
        if all(_matches(item, key, query.getall(key), special) for key in keys):
            result.append(item)
    return result


def _matches(item: Obj, key: str, wanted: list[str], special: Mapping[str, Matcher]) -> bool:
    if key in TAG_KEYS:
        return True
    if key in special:
        return special[key](item, wanted)
    if key not in item:
        return True
    value = item[key]
    if isinstance(value, list):
        return any(any(_same(v, w) for v in value) for w in wanted)
    return any(_same(value, w) for w in wanted)


def _limit(query: MultiMapping[str], max_limit: int) -> int:
    """The page size: ``limit`` (capped at ``max_limit`` when there is one), else
    ``max_limit`` (0: everything)."""
    text = query.get("limit")
    if not text:
        return max_limit
    try:
        limit = int(text)
    except ValueError as exc:
        raise EmuError(400, f"Invalid limit: {text}", kind="BadRequest") from exc
    return min(limit, max_limit) if max_limit and limit > 0 else limit


def page(
    items: list[Obj],
    query: MultiMapping[str],
    collection: str,
    self_url: str,
    *,
    always_links: bool = False,
    max_limit: int = 0,
    octavia: bool = False,
) -> tuple[list[Obj], dict[str, Any]]:
    """``(page, extra)``: the items after ``marker`` up to ``limit`` (and at most
    ``max_limit``: Nova's and Octavia's 1000 apply without a ``limit`` too), and
    ``{"<collection>_links": [{"rel": "next", "href": ...}]}`` when the page is full (an
    extra request then answers an empty page, as Neutron and Nova do)."""
    marker = query.get("marker")
    if marker:
        ids = [item.get("id") for item in items]
        if marker not in ids:
            if octavia:  # octavia/common/exceptions.py InvalidMarker
                raise EmuError(400, f"Supplied pagination marker '{marker}' is not valid.")
            raise EmuError(400, f"marker [{marker}] not found", kind="BadRequest")
        items = items[ids.index(marker) + 1 :]
    links: list[Obj] = []
    limit = _limit(query, max_limit)
    if limit > 0 and len(items) >= limit:
        items = items[:limit]
        args = [(k, v) for k, v in query.items() if k not in ("marker", "limit")]
        args += [("limit", str(limit)), ("marker", str(items[-1]["id"]))]
        links.append({"rel": "next", "href": f"{self_url}?{urlencode(args)}"})
    extra: dict[str, Any] = {}
    if links or always_links:
        extra[f"{collection}_links"] = links
    if octavia:
        extra[f"{collection}_links"] = _octavia_links(items, query, self_url, limit)
    return items, extra


def _octavia_links(
    items: list[Obj], query: MultiMapping[str], self_url: str, limit: int
) -> list[Obj]:
    """Octavia's links (octavia/api/common/pagination.py ``_make_links``): only ``limit``
    (and sorting) survive, filters do not; ``previous`` when a marker was given, ``next``
    when the page is full."""
    if not items:
        return []
    kept = [f"limit={limit}"] + [f"{k}={query[k]}" for k in ("sort", "sort_key") if k in query]
    links = []
    if query.get("marker"):
        back = "&".join([*kept, f"marker={items[0]['id']}", "page_reverse=True"])
        links.append({"rel": "previous", "href": f"{self_url}?{back}"})
    if limit > 0 and len(items) >= limit:
        ahead = "&".join([*kept, f"marker={items[-1]['id']}"])
        links.append({"rel": "next", "href": f"{self_url}?{ahead}"})
    return links


def project_fields(items: list[Obj], query: MultiMapping[str]) -> list[Obj]:
    fields = [f for value in query.getall("fields", []) for f in value.split(",") if f]
    if not fields:
        return items
    return [{k: v for k, v in item.items() if k in fields} for item in items]


def sort_items(views: list[Obj], query: MultiMapping[str]) -> list[Obj]:
    """``sort=key:dir,...`` or ``sort_key``/``sort_dir`` (octavia/api/common/pagination.py),
    ahead of the order the items already have (Octavia's default ``created_at``, ``id``)."""
    if query.get("sort"):
        wanted = [part.partition(":")[::2] for part in str(query["sort"]).split(",")]
    else:
        wanted = [(key, query.get("sort_dir", "asc")) for key in query.getall("sort_key", [])]
    for key, direction in reversed(wanted):  # stable sorts, the last key first
        views = sorted(
            views,
            key=lambda v, k=key: (v.get(k) is not None, str(v.get(k))),
            reverse=(direction or "asc") == "desc",
        )
    return views
