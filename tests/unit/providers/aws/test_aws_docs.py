"""docs/providers/aws.md stays true: its IAM policy lists exactly the AWS calls the code makes,
and its annotation table exactly the annotations the code reads."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from kccm.providers.aws.annotations import ANNOTATION_PREFIX, SUPPORTED, UNSUPPORTED
from kccm.providers.aws.classic_spec import CLASSIC_ANNOTATIONS

ROOT = Path(__file__).resolve().parents[4]
DOC = (ROOT / "docs" / "providers" / "aws.md").read_text()
IAM_PREFIX = {"ec2": "ec2", "elb": "elasticloadbalancing", "elbv2": "elasticloadbalancing"}
TAGGING_ON_CREATE = {"elasticloadbalancing:AddTags"}


def _calls_in_code() -> set[str]:
    """``service:Operation`` of every ``api.call``/``api.pages`` in the provider package."""
    found = set()
    for path in (ROOT / "src" / "kccm" / "providers" / "aws").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            args = node.args[:2]
            if (
                node.func.attr in ("call", "pages")
                and len(args) == 2
                and all(isinstance(a, ast.Constant) for a in args)
            ):
                service, operation = (str(a.value) for a in args)
                camel = "".join(part.title() for part in operation.split("_"))
                found.add(f"{IAM_PREFIX[service]}:{camel}")
    return found


def test_the_iam_policy_lists_exactly_the_calls_made() -> None:
    block = DOC.split("<!-- iam-policy -->")[1].split("<!-- /iam-policy -->")[0]
    policy = json.loads(block.strip().removeprefix("```json").removesuffix("```"))
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    calls = _calls_in_code()
    assert len(calls) > 20  # the scan found the calls
    assert actions == calls | TAGGING_ON_CREATE


def test_the_annotation_tables_match_the_code() -> None:
    documented = set(re.findall(r"`(aws-load-balancer-[a-z0-9-]+)`", DOC))
    code = SUPPORTED + UNSUPPORTED + CLASSIC_ANNOTATIONS
    suffixes = {a.removeprefix(ANNOTATION_PREFIX) for a in code}
    mentioned_short = set(re.findall(r"`-([a-z0-9-]+)`", DOC))
    full = {d.removeprefix("aws-load-balancer-") for d in documented} | mentioned_short
    assert suffixes <= full
