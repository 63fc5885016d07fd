"""A fault for moto: an EC2 action answered with a non-AWS error, an HTTP 500 with an HTML body.

Stock moto 5 answers ``DescribeInstanceTopology`` so (it has no handler: werkzeug's "500
Internal Server Error" page), and a proxy or an EC2-compatible cloud can answer any call so.
botocore cannot parse it (``ResponseParserError: ... invalid XML received``), which is not a
``ClientError``. Kept apart from ``aws_moto.py`` (whose ``topology_fault`` answers EC2 error
codes, which botocore parses); like it, this patches moto's response class, so both the
in-process mock and the server :func:`aws_moto.moto_server` runs in this process answer so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HTML_500_BODY", "html_500"]

HTML_500_BODY = (
    "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
    "<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was "
    "unable to complete your request. Either the server is overloaded or there is an error "
    "in the application.</p>\n"
)
"""werkzeug's page, byte for byte what stock moto 5 answers for an action it lacks."""


@contextmanager
def html_500(action: str = "describe_instance_topology") -> Iterator[None]:
    """While inside, moto answers the EC2 ``action`` (boto3's snake_case name) with HTTP 500
    and :data:`HTML_500_BODY`; afterwards as before (taught, stock or missing)."""
    from moto.ec2.responses import EC2Response

    response_class: Any = EC2Response
    before = response_class.__dict__.get(action)

    def answer(self: Any) -> tuple[str, dict[str, Any]]:
        return HTML_500_BODY, {"status": 500, "Content-Type": "text/html; charset=utf-8"}

    setattr(response_class, action, answer)
    try:
        yield
    finally:
        if before is None:
            delattr(response_class, action)
        else:
            setattr(response_class, action, before)
