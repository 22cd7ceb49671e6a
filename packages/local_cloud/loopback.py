"""The serving part every fake Google endpoint shares: a threaded HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandInHandler(BaseHTTPRequestHandler):
    """A stand-in's request handler: ``reply`` answers, and the server's per-request log stays out of the output."""

    def reply(self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def reply_json(self, status: int, body) -> None:
        self.reply(status, json.dumps(body).encode(), "application/json; charset=UTF-8")

    def log_message(self, format, *args) -> None:
        pass


class LoopbackServer:
    """A context manager that serves ``handler_class`` (with ``fake`` bound to this object) on a free port.

    Subclasses set ``handler_class`` (and may set ``server_class``) after defining their handler.
    """

    handler_class: type
    server_class: type = ThreadingHTTPServer

    def __enter__(self):
        handler = type("Handler", (self.handler_class,), {"fake": self})
        self._server = self.server_class(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll: shutdown() waits up to one poll interval, and the default 0.5 s per server added a second
        # to the teardown of every test that serves two fakes.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"
