"""GET one URL of the daemon every ``--interval`` seconds from a process of its own; print the
seconds each answer took, one line each (``failed <error>`` for a failure), until terminated.

Usage: python bench/http_probe.py URL [--interval 1.0]   (a bearer token in KCCM_PROBE_TOKEN)

bench/scale.py runs it beside the daemon. Fetched from a thread of the bench's own process, an
answer also waited for the bench's own work (its watch decoding holds the GIL the fetching
thread needs after every read and write): on one 10,000 + 3,000 run the bench's thread saw
197 ms where curl, run beside it, saw at most 120 ms (issue 28). Every fetch opens a new TLS
connection, as a kubelet's probe does: the handshake is part of the figure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request


def fetch(url: str, token: str, context: ssl.SSLContext) -> float:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    start = time.perf_counter()
    with urllib.request.urlopen(request, context=context, timeout=60) as response:
        response.read()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    token = os.environ.get("KCCM_PROBE_TOKEN", "")
    context = ssl._create_unverified_context()  # the daemon's self-signed serving certificate
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        try:
            line = f"{fetch(args.url, token, context):.6f}"
        except (OSError, urllib.error.URLError) as exc:
            line = f"failed {exc}"
        print(line, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
