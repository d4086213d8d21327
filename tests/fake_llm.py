"""A scripted, OpenAI-compatible chat-completions server for tests (standard library only).

Usage::

    with FakeLLM() as llm:
        llm.script("planner", "1. load the csv", Error(429, "slow down"))
        llm.default("coder", lambda req: "```python\\nprint(1)\\n```")
        ...  # point the code under test at llm.base_url
        assert llm.calls("planner")[0]["run"] == "r1"

Requests are routed by the ``X-DSStar-Agent`` header. Every request is recorded in
``llm.requests`` as a dict with keys ``agent``, ``run``, ``headers``, ``body``, ``messages``,
``status`` and ``at`` (when its reply was sent, ``time.monotonic()``). ``llm.peak_in_flight``
is the most chat requests it was answering at once.

Usage counts 4 characters a token, of the prompt and of the whole reply. Like a model that
ignores it, the server does not apply a request's ``max_tokens``: a scripted reply is sent
and counted in full, however long.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Error", "FakeLLM", "Reasoned", "Reply", "Responder", "text_of"]

_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("service_unavailable", "service_unavailable"),
}


@dataclass(frozen=True)
class Error:
    """A scripted failure: the server answers ``status`` with an OpenAI-style error body."""

    status: int
    message: str = "scripted error from FakeLLM"

    def body(self) -> dict[str, Any]:
        """Return the OpenAI-style JSON error payload for this failure."""
        etype, code = _ERROR_TYPES.get(self.status, ("server_error", "server_error"))
        return {"error": {"message": self.message, "type": etype, "code": code}}


@dataclass(frozen=True)
class Reasoned:
    """A reply from a reasoning model: the answer in ``content``, its thinking sent apart in
    ``reasoning_content`` (as DeepSeek, and Gemini or o-series models through gateways, do)."""

    content: str
    reasoning: str


Reply = str | Error | Reasoned
Responder = Callable[[dict[str, Any]], Reply]


def _content_text(content: Any) -> str:
    """Flatten a message ``content`` (string or list of parts) into plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def text_of(req: dict[str, Any]) -> str:
    """Return all message contents of a recorded request joined with newlines."""
    return "\n".join(_content_text(m.get("content")) for m in req.get("messages") or [])


class FakeLLM:
    """Scripted chat-completions server bound to 127.0.0.1 on a free port."""

    def __init__(self) -> None:
        self.port: int = 0
        self.base_url: str = ""
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._defaults: dict[str, Responder] = {}
        self._fallback: Responder | None = None
        self._handler: Responder | None = None
        self._intercept: Callable[[dict[str, Any]], Reply | None] | None = None
        self._on_models: Callable[[], None] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._keys: set[str] | None = None
        self._prompts: list[str] = []  # for the prompt cache OpenAI keeps by itself
        self.in_flight = 0  # chat requests received and not yet answered
        self.peak_in_flight = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeLLM:
        """Start serving in a daemon thread; sets ``port`` and ``base_url``."""
        if self._server is not None:
            return self
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------
    def script(self, agent: str, *replies: Reply) -> FakeLLM:
        """Append ``replies`` (strings or :class:`Error`) to ``agent``'s FIFO queue."""
        with self._lock:
            self._queues[agent].extend(replies)
        return self

    def default(self, agent: str, fn: Responder) -> FakeLLM:
        """Set the responder used for ``agent`` once its queue is empty."""
        with self._lock:
            self._defaults[agent] = fn
        return self

    def fallback(self, fn: Responder) -> FakeLLM:
        """Set the responder used for any agent with no queued reply and no default."""
        with self._lock:
            self._fallback = fn
        return self

    def set_handler(self, fn: Responder | None) -> FakeLLM:
        """Replace routing entirely with ``fn`` (``None`` restores scripted routing)."""
        with self._lock:
            self._handler = fn
        return self

    def intercept(self, fn: Callable[[dict[str, Any]], Reply | None] | None) -> FakeLLM:
        """Let ``fn`` see every request first: a reply it returns is sent instead of the
        scripted one (which stays queued); ``None`` lets scripted routing answer."""
        with self._lock:
            self._intercept = fn
        return self

    def on_models(self, fn: Callable[[], None] | None) -> FakeLLM:
        """Call ``fn`` whenever the list of models is asked for (a client's preflight probe),
        before it is answered; ``None`` removes it."""
        with self._lock:
            self._on_models = fn
        return self

    def require_key(self, *keys: str) -> FakeLLM:
        """Answer 401 to any request (models list included) whose bearer key is not one of
        ``keys``, as a real provider does; no arguments: accept every key again."""
        with self._lock:
            self._keys = set(keys) or None
        return self

    def _cached_tokens(self, prompt: str) -> int:
        """Tokens of `prompt` a provider would serve from its prompt cache, as OpenAI counts
        them: the longest prefix shared with an earlier prompt, from 1,024 tokens on, in steps
        of 128 (a token being 4 characters here)."""
        with self._lock:
            shared = max((_common_prefix(prompt, p) for p in self._prompts), default=0)
            self._prompts.append(prompt)
        tokens = shared // 4
        return tokens // 128 * 128 if tokens >= 1024 else 0

    def _key_refused(self, headers: Any) -> bool:
        auth = headers.get("Authorization") or ""
        return self._keys is not None and auth.removeprefix("Bearer ").strip() not in self._keys

    def reset(self) -> FakeLLM:
        """Forget every script, responder and recorded request (for a server shared by tests)."""
        with self._lock:
            self._queues.clear()
            self._defaults.clear()
            self._fallback = self._handler = self._intercept = self._on_models = None
            self._keys = None
            self._prompts.clear()
            self.requests.clear()
            self.peak_in_flight = self.in_flight
        return self

    def pending(self, agent: str) -> int:
        """Return how many scripted replies are still queued for ``agent``."""
        with self._lock:
            return len(self._queues.get(agent, ()))

    # -- inspection --------------------------------------------------------------------------
    def calls(self, agent: str | None = None) -> list[dict[str, Any]]:
        """Return recorded requests, optionally only those from ``agent``."""
        with self._lock:
            return [r for r in self.requests if agent is None or r["agent"] == agent]

    @staticmethod
    def last_user_text(req: dict[str, Any]) -> str:
        """Return all message contents of ``req`` joined with newlines (see :func:`text_of`)."""
        return text_of(req)

    # -- routing -----------------------------------------------------------------------------
    def _respond(self, req: dict[str, Any]) -> Reply:
        """Pick the reply for ``req``: handler, queue, per-agent default, global fallback."""
        agent = req["agent"]
        intercept = self._intercept
        if intercept is not None:
            override = intercept(req)
            if override is not None:
                return override
        with self._lock:
            handler = self._handler
            queue = self._queues.get(agent)
            queued = queue.popleft() if handler is None and queue else None
            fn = self._defaults.get(agent) or self._fallback
        if handler is not None:
            return handler(req)
        if queued is not None:
            return queued
        if fn is not None:
            return fn(req)
        return Error(500, f"FakeLLM: no scripted reply for agent {agent!r}")

    def _record(self, req: dict[str, Any]) -> None:
        with self._lock:
            req.setdefault("at", time.monotonic())
            self.requests.append(req)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _completion(
    model: str, reply: str | Reasoned, prompt_tokens: int, cached: int = 0
) -> dict[str, Any]:
    """Build a non-streaming ``chat.completion`` response body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if isinstance(reply, Reasoned):
        message = {"role": "assistant", "content": reply.content}
        message["reasoning_content"] = reply.reasoning
    # What the model wrote, all of it (a reasoning model's thinking counts, as providers bill
    # it), whatever the request's max_tokens said: this server never cuts a reply.
    written = message["content"] + message.get("reasoning_content", "")
    completion_tokens = max(1, len(written) // 4)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def _chunks(model: str, reply: str | Reasoned, prompt_tokens: int) -> list[dict[str, Any]]:
    """Build the ``chat.completion.chunk`` sequence for a streamed reply."""
    full = _completion(model, reply, prompt_tokens)
    base = {k: full[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    delta = full["choices"][0]["message"]
    return [
        base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        base
        | {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": full["usage"],
        },
    ]


def _make_handler(llm: FakeLLM) -> type[BaseHTTPRequestHandler]:
    """Create a request-handler class bound to ``llm``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default per-request stderr logging."""

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, chunks: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _not_found(self) -> None:
            err = {"message": f"no route {self.command} {self.path}", "type": "not_found_error"}
            self._send_json(404, {"error": err | {"code": "not_found"}})

        def do_GET(self) -> None:
            if llm._key_refused(self.headers):
                self._send_json(401, Error(401, "Incorrect API key provided").body())
            elif self.path.split("?")[0].rstrip("/") in ("/v1/models", "/models"):
                if llm._on_models is not None:
                    llm._on_models()
                model = {"id": "test-model", "object": "model", "owned_by": "fake-llm"}
                self._send_json(200, {"object": "list", "data": [model]})
            else:
                self._not_found()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if llm._key_refused(self.headers):
                self._send_json(401, Error(401, "Incorrect API key provided").body())
                return
            if self.path.split("?")[0].rstrip("/") in ("/v1/embeddings", "/embeddings"):
                self._embeddings(raw)
                return
            if self.path.split("?")[0].rstrip("/") not in (
                "/v1/chat/completions",
                "/chat/completions",
            ):
                self._not_found()
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                self._send_json(400, Error(400, f"invalid JSON body: {exc}").body())
                return
            if not isinstance(body, dict):
                self._send_json(400, Error(400, "JSON body must be an object").body())
                return
            req: dict[str, Any] = {
                "agent": self.headers.get("X-DSStar-Agent", ""),
                "run": self.headers.get("X-DSStar-Run", ""),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
                "messages": body.get("messages") or [],
                "status": 200,
            }
            llm._enter()  # until the reply is sent, as a client holding a slot sees it
            try:
                self._chat(req, body)
            finally:
                llm._leave()

        def _chat(self, req: dict[str, Any], body: dict[str, Any]) -> None:
            try:
                reply = llm._respond(req)
            except Exception as exc:  # a buggy responder should fail the test loudly
                reply = Error(500, f"FakeLLM responder raised {exc!r}")
            if isinstance(reply, Error):
                req["status"] = reply.status
                llm._record(req)
                self._send_json(reply.status, reply.body())
                return
            llm._record(req)
            model = str(body.get("model", "test-model"))
            prompt = text_of(req)
            prompt_tokens = max(1, len(prompt) // 4)
            cached = llm._cached_tokens(prompt)
            if body.get("stream"):
                self._send_stream(_chunks(model, reply, prompt_tokens))
            else:
                self._send_json(200, _completion(model, reply, prompt_tokens, cached))

        def _embeddings(self, raw: bytes) -> None:
            """Deterministic vectors: the text's letter counts a-z (recorded like chats)."""
            body = json.loads(raw or b"{}")
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            llm._record({
                "agent": self.headers.get("X-DSStar-Agent", ""),
                "run": self.headers.get("X-DSStar-Run", ""),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body, "messages": [], "status": 200,
            })  # fmt: skip
            data = [
                {"object": "embedding", "index": i,
                 "embedding": [float(t.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"]}
                for i, t in enumerate(texts)
            ]  # fmt: skip
            tokens = sum(len(t) // 4 + 1 for t in texts)
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            self._send_json(200, {"object": "list", "data": data, "model": "fake", "usage": usage})

    return Handler
