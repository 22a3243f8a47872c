"""A fake OpenAI-compatible server on loopback: canned replies in script order, every request kept."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-AXb12cD3eF4gH5iJ6kL7mN8oP9",
    "object": "chat.completion",
    "created": 1733000000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_x1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command":"ls -la"}'},
                    }
                ],
                "refusal": None,
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 81, "completion_tokens": 17, "total_tokens": 98},
    "system_fingerprint": "fp_0ba0d124f1",
}


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = field(default_factory=lambda: COMPLETION)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAI:
    """Replies in script order (then the canned completion) and records every request."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.received: list[Received] = []
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def then(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the default of 5 makes concurrent connects wait for SYN retries


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
        self.fake.received.append(received)
        reply = self.fake.script.popleft() if self.fake.script else Reply()
        if self.path != "/v1/chat/completions":
            reply = Reply(404, {"error": {"message": f"no route {self.path}"}})
        time.sleep(reply.delay_s)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass
