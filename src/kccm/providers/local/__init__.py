"""``local``: a cloud on one machine, its state in a SQLite file (see docs/local-provider.md)."""

from kccm.providers.local.provider import LocalCloud, new_local_cloud

__all__ = ["LocalCloud", "new_local_cloud"]
