"""An OpenAI-compatible ``/chat/completions`` server on loopback, for clients that must never
reach a real network: summaries, LLM judges, LLM distractors."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any], int], tuple[int, "str | bytes"]]
"""(request body, 1-based request number) -> (HTTP status, reply text, or raw bytes sent as they are)."""


class FakeChatEndpoint:
    def __init__(self, reply: Reply):
        self.reply = reply
        self.requests: list[tuple[str, Message, dict[str, Any]]] = []
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with endpoint.lock:
                    endpoint.requests.append((self.path, self.headers, body))  # header names are case-insensitive
                    number = len(endpoint.requests)
                status, content = endpoint.reply(body, number)
                if isinstance(content, bytes):
                    data = content
                else:
                    payload = {"choices": [{"message": {"content": content}}]} if status == 200 else {"error": "x"}
                    data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
