"""Octavia v2 (placeholder: filled in by the next commit)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["routes"]

routes = web.RouteTableDef()
