"""Which subnet of the floating network a new floating IP comes from (upstream
``pkg/openstack/loadbalancer_subnet_match.go`` v1.36.0: ``floatingSubnetSpec``,
``subnetNameMatcher``, ``tweakListOpts``, ``tagList``).

A spec is a subnet ID, or a name pattern and/or tags: the pattern is a name, a glob (upstream's
``gopkg.in/godo.v2/glob.Globexp`` v2.0.9: ``*`` and ``?``, ``[...]``, ``{a,b}`` alternatives,
``**/`` directories; :func:`glob_regexp`), or a regular expression after ``~``, negated by a
leading ``!``; tags are a comma-separated list,
any of which must be present, all of them after ``&``, negated by a leading ``!``. Tags are
filtered by Neutron (``tags``, ``tags-any``, ``not-tags``, ``not-tags-any``), names here.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kccm.providers.openstack.config_sections import LoadBalancerOpts
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer.annotations import ServiceAnnotations

__all__ = ["FloatingSubnetSpec", "glob_regexp", "tag_list"]

Matcher = Callable[[dict[str, Any]], bool]


def tag_list(tags: str) -> tuple[list[str], bool, bool]:
    """Upstream ``tagList``: (tags, negated, all)."""
    negated = tags.startswith("!")
    tags = tags[1:] if negated else tags
    every = tags.startswith("&")
    tags = tags[1:] if every else tags
    return [t for t in re.split(r"[\s,]+", tags) if t], negated, every


_DIRECTORIES = r"(?:[.{}\w\-\ ]+\/)*"
"""Globexp's ``zeroOrMoreDirectories``."""
_ESCAPED = frozenset("\\$^+.()=!|")


def _glob_piece(glob: str, i: int, in_group: bool) -> tuple[str, int, bool]:
    """One step of ``Globexp``: the regexp text for ``glob[i:]``'s next element, how many
    characters it took, whether a ``{...}`` group is open after it."""
    char, rest = glob[i], glob[i:]
    if char in _ESCAPED:
        return "\\" + char, 1, in_group
    if char == "/":
        if rest.startswith("/**/"):
            return "/" + _DIRECTORIES, 4, in_group
        return ("/.*", 3, in_group) if rest == "/**" else ("/", 1, in_group)
    if char == "?":
        return ".", 1, in_group
    if char == "{":
        return ("\\{", 2, in_group) if rest.startswith("{{") else ("(", 1, True)
    if char == "}":
        return (")", 1, False) if in_group else ("}", 1, in_group)
    if char == ",":
        return ("|", 1, in_group) if in_group else ("\\,", 1, in_group)
    if char == "*":
        return (_DIRECTORIES, 3, in_group) if rest.startswith("**/") else ("[^/]*", 1, in_group)
    return char, 1, in_group  # '[' and ']' too: a character class, as Go reads it


def glob_regexp(glob: str) -> re.Pattern[str]:
    """Upstream's ``glob.Globexp``: the glob as an anchored regular expression (``\\Z``:
    Go's ``$`` without the multi-line flag; ASCII ``\\w``, as Go's). A pattern Go cannot
    compile makes upstream panic (``MustCompile``); kccm raises ``re.error``."""
    pieces, i, in_group = ["^"], 0, False
    while i < len(glob):
        piece, taken, in_group = _glob_piece(glob, i, in_group)
        pieces.append(piece)
        i += taken
    pieces.append("\\Z")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # Python's nested-set notice on "[["
        return re.compile("".join(pieces), re.ASCII)


def _name_matcher(pattern: str) -> Matcher:
    """Upstream ``subnetNameMatcher`` (``regexpNameMatcher``: the leftmost match must be the
    whole name; a glob is anchored)."""
    negated = pattern.startswith("!")
    pattern = pattern[1:] if negated else pattern
    if pattern.startswith("~"):
        try:
            regexp = re.compile(pattern[1:])
        except re.error as err:
            raise ann.LBAnnotationError(
                f"invalid subnet regexp pattern {pattern[1:]!r}: {err}"
            ) from err
    else:
        try:
            regexp = glob_regexp(pattern)
        except re.error as err:
            raise ann.LBAnnotationError(f"invalid subnet glob pattern {pattern!r}: {err}") from err

    def match(subnet: dict[str, Any]) -> bool:
        name = str(subnet.get("name", ""))
        found = regexp.search(name)
        return (found is not None and found.group(0) == name) != negated

    return match


@dataclass(frozen=True)
class FloatingSubnetSpec:
    """Upstream ``floatingSubnetSpec``."""

    subnet_id: str = ""
    subnet: str = ""
    subnet_tags: str = ""

    @classmethod
    def from_annotations(cls, notes: ServiceAnnotations) -> FloatingSubnetSpec:
        if notes.floating_subnet_id:
            return cls(subnet_id=notes.floating_subnet_id)
        return cls(subnet=notes.floating_subnet, subnet_tags=notes.floating_subnet_tags)

    @classmethod
    def from_options(cls, opts: LoadBalancerOpts) -> FloatingSubnetSpec:
        if opts.floating_subnet_id:
            return cls(subnet_id=opts.floating_subnet_id)
        return cls(subnet=opts.floating_subnet, subnet_tags=opts.floating_subnet_tags)

    def configured(self) -> bool:
        return bool(self.subnet_id) or self.matcher_configured()

    def matcher_configured(self) -> bool:
        return not self.subnet_id and bool(self.subnet or self.subnet_tags)

    def list_params(self, network_id: str) -> dict[str, str]:
        """Upstream ``listSubnetsForNetwork`` + ``tweakListOpts``: the subnet list filters."""
        params = {"network_id": network_id}
        if self.subnet_tags:
            tags, negated, every = tag_list(self.subnet_tags)
            key = {
                (True, True): "not-tags-any",
                (True, False): "tags",
                (False, True): "not-tags",
                (False, False): "tags-any",
            }[(every, negated)]
            params[key] = ",".join(tags)
        return params

    def validate(self) -> None:
        """Refuse a bad name pattern before anything is created."""
        if self.subnet:
            _name_matcher(self.subnet)

    def select(self, subnets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The listed subnets whose name matches the pattern (all of them without one)."""
        if not self.subnet:
            return subnets
        match = _name_matcher(self.subnet)
        return [s for s in subnets if match(s)]

    def __str__(self) -> str:
        parts = [
            f"{k}: {v!r}"
            for k, v in (
                ("subnetID", self.subnet_id),
                ("pattern", self.subnet),
                ("tags", self.subnet_tags),
            )
            if v
        ]
        return ", ".join(parts) or "<none>"
