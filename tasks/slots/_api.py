"""The few calls of Prefect's global concurrency API that slots need, made directly.

One kept-alive client per process: a slot costs two small requests, not a new connection and
an event loop as prefect.concurrency's context manager does (measured: 4x the wall time of a
100-file describe on 2 cores).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

__all__ = ["BUSY_RETRIES", "get", "post"]

BUSY_RETRIES = 100  # about 25 s of short waits before a slot request gives up

_lock = threading.Lock()
# One slot request of this process at a time. A SQLite-backed Prefect server (3.8) answers a
# lease request that meets another one in flight only after its 60 s busy timeout, now and
# then (benchmarks/slot_requests.py: 6 threads, 6 of ~1,300 take/give pairs a minute stalled
# 60 s; in turn, none of ~7,400 took over 0.5 s). Each request takes milliseconds.
_one_at_a_time = threading.Lock()
_client: Any = None
_client_url: str | None = None


def _shared_client() -> Any:
    """The client for the API in use now: made again when the API changed (a notebook or a
    test that points this process at another server)."""
    global _client, _client_url
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    with _lock:
        if _client is None or url != _client_url:
            from prefect import get_client

            if _client is not None:
                _client.__exit__(None, None, None)
            _client, _client_url = get_client(sync_client=True), url
            _client.__enter__()
        return _client


def get(path: str) -> Any:
    """GET from the server's API through the shared client; None when it fails."""
    import httpx

    transport = _shared_client()._client
    try:
        response = httpx.Client.send(transport, transport.build_request("GET", path))
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    return response.json()


def post(path: str, body: dict[str, Any], tries: int = BUSY_RETRIES) -> Any:
    """POST to the server's concurrency API, retried here within milliseconds while the
    server is busy (503) or unreachable for a moment; other errors are raised at once.

    Prefect's client would wait about 2 s before each retry of a 503 (even with retries
    turned off), and a SQLite-backed server answers 503 whenever another write holds the
    database, which happens to most slot requests of a busy run. So the request goes out
    through the client's connection and credentials, but not its retry loop."""
    import httpx

    delay = 0.005
    for attempt in range(tries):
        transport = _shared_client()._client  # Prefect's httpx client: base URL, auth headers
        try:
            request = transport.build_request("POST", path, json=body)
            with _one_at_a_time:
                response = httpx.Client.send(transport, request)
            response.raise_for_status()
            return response
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 503 or attempt == tries - 1:
                raise
        except httpx.TransportError:
            if attempt == tries - 1:
                raise
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.25)
    raise AssertionError("unreachable")
