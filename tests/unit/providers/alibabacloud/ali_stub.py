"""A stand-in for :class:`kccm.providers.alibabacloud.rpc.RPCClient`: answers from tables
and records every call (action and parameters)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kccm.cloudprovider.apicalls import CloudAPICalls, classify_by_verb

Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


class StubRPC:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self.handlers = dict(handlers)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.ledger = CloudAPICalls()
        self.region = "cn-hangzhou"

    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append((f"{product}:{action}", dict(params)))
        self.ledger.record(f"{product}:{action}", mutating=classify_by_verb(action))
        return self.handlers[f"{product}:{action}"](params)

    def token_pages(
        self, product: str, action: str, params: Mapping[str, Any], token: str = "NextToken"
    ) -> Iterator[dict[str, Any]]:
        current = dict(params)
        while True:
            page = self.call(product, action, current)
            yield page
            if not page.get(token):
                return
            current[token] = page[token]

    def actions(self) -> list[str]:
        return [action for action, _ in self.calls]
