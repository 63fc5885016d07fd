"""The ``world`` of one openstack provider test: servers it added to the emulator, removed
afterwards (see conftest.py)."""

from __future__ import annotations

from typing import Any

__all__ = ["World"]


class World:
    """Servers added for one test, removed afterwards."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self.admin = emulator.admin
        self.added: list[str] = []

    def server(self, name: str, **kwargs: Any) -> dict[str, Any]:
        server: dict[str, Any] = self.admin.add_server(name, **kwargs)
        self.added.append(server["id"])
        return server

    def delete(self, server_id: str) -> None:
        self.admin.delete_server(server_id)
        self.added.remove(server_id)

    def cleanup(self) -> None:
        self.admin.clear_faults()
        for server_id in reversed(self.added):
            self.admin.delete_server(server_id)
        self.added.clear()
