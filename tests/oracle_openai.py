"""An OpenAI-compatible policy server on loopback that plays the oracle: a real HTTP endpoint for the
``openai`` policy, in this process (a thread) or in a subprocess that a test can kill.

It knows each task by its instruction (in the agent's first message) and answers by turn (the
assistant messages so far): the oracle's solve command, ``fillers`` harmless commands, then submit.
Being stateless, a restarted server goes on where the dead one stopped. Answers carry
``ares_policy_version`` from ``version`` (the trainer's counter). ``hold(turn)`` keeps a request
unanswered while it returns True: a test's way to have a policy call in flight for as long as it
wants. Run as a script it serves on ``--port`` and holds turns >= 1 while ``--hold-file`` exists.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import ares
from ares.policies.scripted import oracle_command


def oracle_script(preset: str, tasks: str, fillers: int = 0) -> dict[str, Any]:
    """The replies for the preset's tasks through its agent's action format (JSON-serializable)."""
    env = ares.make(preset, tasks=tasks)
    fmt = env.action_format
    replies = {
        task.instruction: [fmt.command(oracle_command(task)).content]
        + [fmt.command("true").content] * fillers
        for task in env.tasks
    }
    return {"replies": replies, "submit": fmt.submit().content}


class OracleOpenAI:
    """Serves ``script`` (``oracle_script``) on 127.0.0.1:``port`` (0: any free port)."""

    def __init__(
        self,
        script: dict[str, Any],
        *,
        port: int = 0,
        version: Callable[[], int | None] = lambda: None,
        hold: Callable[[int], bool] = lambda turn: False,
    ) -> None:
        self.script, self.version, self.hold = script, version, hold
        self.answered = self.held = self.in_flight = 0
        self.on_held: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"server_of": self})
        self._server = _Threaded(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def serve_forever(self) -> None:
        self._server.serve_forever(0.05)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to one chat completion request, after any hold."""
        messages = body.get("messages") or []
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        first = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        replies = next((r for text, r in self.script["replies"].items() if text in first), [])
        self._count(in_flight=1)
        try:
            if self.hold(turn):
                self._count(held=1)
                self.on_held()
                while self.hold(turn):
                    time.sleep(0.01)
                self._count(held=-1)
            content = replies[turn] if turn < len(replies) else self.script["submit"]
            message = {"role": "assistant", "content": content}
            answer: dict[str, Any] = {
                "id": f"chatcmpl-{self.answered}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }  # fmt: skip
            version = self.version()
            if version is not None:
                answer["ares_policy_version"] = version
            self._count(answered=1)
            return answer
        finally:
            self._count(in_flight=-1)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)


class _Threaded(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128


def send_json(handler: BaseHTTPRequestHandler, body: Any) -> None:
    """Answer a request with ``body`` as JSON (200); a client that went away is no error."""
    data = json.dumps(body).encode()
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    server_of: OracleOpenAI
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        send_json(self, self.server_of.reply(json.loads(raw)))

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--hold-file", type=Path, required=True)
    args = parser.parse_args()
    hold_file: Path = args.hold_file
    server = OracleOpenAI(
        json.loads(args.script.read_text()),
        port=args.port,
        hold=lambda turn: turn >= 1 and hold_file.exists(),
    )
    server.on_held = lambda: print("HELD", flush=True)
    print("LISTENING", server.port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
