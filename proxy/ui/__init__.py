"""The dashboard at /ui: savings per session, each session's requests, and each request's changes with their
reasons, server-rendered from the report views (proxy.report, proxy.inspect). Served from the package, nothing
fetched at run time."""

from .routes import ui_routes

__all__ = ["ui_routes"]
