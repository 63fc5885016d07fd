"""``local``: a cloud on one machine, its state in a SQLite file (see docs/local-provider.md)."""

__all__: list[str] = []
