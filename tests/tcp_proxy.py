"""A TCP proxy on loopback that can be switched off and on (a real network outage for
tests), or lose the reply to one HTTP request (the server acted on it; the client never hears,
as when a busy server answers after the client's read timeout)."""

from __future__ import annotations

import re
import socket
import threading


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target port. `down()` drops every connection and
    refuses new ones until `up()`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._up = threading.Event()
        self._up.set()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._lose: tuple[re.Pattern[bytes], re.Pattern[bytes]] | None = None
        self._losing: set[socket.socket] = set()  # upstreams whose next reply is lost
        self.lost = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def down(self) -> None:
        self._up.clear()
        with self._lock:
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def up(self) -> None:
        self._up.set()

    def lose_reply(self, request_line: bytes, body: bytes) -> None:
        """Forward the next request whose request line matches `request_line` and whose
        body matches `body` (regular expressions), then cut its connection instead of
        passing the reply on."""
        with self._lock:
            self._lose = (re.compile(request_line), re.compile(body))

    def close(self) -> None:
        self.down()
        _close(self._listener)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                _close(client)  # the outage: connections are cut at once
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open.update({client, upstream})
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client to server: as `_pipe`, watching for the request whose reply is to be lost
        (its request line and its body may come in separate chunks)."""
        line = b""

        def watch(chunk: bytes) -> None:
            nonlocal line
            with self._lock:
                if self._lose is None:
                    return
                first = re.match(rb"[A-Z]+ \S+ HTTP/1\.1", chunk)
                line = first.group() if first else line
                if self._lose[0].search(line) and self._lose[1].search(chunk):
                    self._losing.add(upstream)
                    self._lose = None

        self._pipe(client, upstream, watch)

    def _pipe(self, source: socket.socket, sink: socket.socket, watch=None) -> None:
        try:
            while chunk := source.recv(65536):
                if watch:
                    watch(chunk)
                with self._lock:
                    lost = source in self._losing
                if lost:  # the reply to the marked request: never delivered
                    self.lost += 1
                    return
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
