"""A small command-line coding agent that runs *inside* a sandbox and calls its LLM over HTTP.

It is the black-box agent ARES ships to show that any program which speaks an LLM API can be stepped:
ARES never imports it, it only uploads this file and runs ``python3 tool_loop_cli.py`` with the
instruction on stdin. It uses the standard library only (sandbox images have a bare ``python3``) and
speaks three dialects, chosen with ``--api``: OpenAI Chat Completions (``chat``, at
``$OPENAI_BASE_URL``), OpenAI Responses (``responses``) and Anthropic Messages (``anthropic``, at
``$ANTHROPIC_BASE_URL``). Its two tools are ``bash`` (``{"command": str}``) and ``submit`` (``{}``),
the same names and arguments as ARES's tool-calling agent, so the same scripted policies drive both.

It stops when the model calls ``submit``, after ``--max-format-errors`` replies in a row without a tool
call, or after ``--max-turns`` LLM calls. Exit code 0 means submitted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

SYSTEM = (
    "You are a coding agent working in a Linux sandbox. Use the bash tool to inspect and change files "
    "and to run commands; call submit when the task is done."
)
BASH = ("bash", "Run a bash command in the working directory; returns its exit code and output.")
SUBMIT = ("submit", "Finish: your changes are final and will be tested.")
BASH_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "The command to run."}},
    "required": ["command"],
}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
NUDGE = "Your reply had no tool call. Call the bash tool to act, or submit when you are done."
MAX_OUTPUT_CHARS = 10_000


def post(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise SystemExit(f"LLM call failed: HTTP {error.code}: {error.read()[:2000]!r}") from None


def run_bash(command: str, timeout_s: float) -> str:
    try:
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, errors="replace", timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return f"[timed out after {timeout_s:g} s]"
    output = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
    if len(output) > MAX_OUTPUT_CHARS:
        half = MAX_OUTPUT_CHARS // 2
        output = f"{output[:half]}\n[... output elided ...]\n{output[-half:]}"
    return f"exit code {done.returncode}\n{output}"


class Chat:
    """OpenAI Chat Completions: tool calls on the assistant message, results as tool messages."""

    def __init__(self, args: argparse.Namespace, instruction: str) -> None:
        self.url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
        self.headers = {"authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}
        self.model = args.model
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": instruction},
        ]
        self.tools = [
            {"type": "function", "function": {"name": n, "description": d, "parameters": s}}
            for (n, d), s in ((BASH, BASH_SCHEMA), (SUBMIT, EMPTY_SCHEMA))
        ]

    def ask(self, timeout_s: float) -> list[tuple[str, str, dict[str, Any]]]:
        body = {"model": self.model, "messages": self.messages, "tools": self.tools}
        message = post(self.url, body, self.headers, timeout_s)["choices"][0]["message"]
        self.messages.append(message)
        return [
            (c["id"], c["function"]["name"], parse_arguments(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]

    def answer(self, results: list[tuple[str, str]]) -> None:
        self.messages += [{"role": "tool", "tool_call_id": i, "content": text} for i, text in results]

    def nudge(self) -> None:
        self.messages.append({"role": "user", "content": NUDGE})


class Responses:
    """OpenAI Responses: the conversation is a list of input items, echoed back with each call."""

    def __init__(self, args: argparse.Namespace, instruction: str) -> None:
        self.url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/responses"
        self.headers = {"authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}
        self.model = args.model
        self.items: list[dict[str, Any]] = [{"role": "user", "content": instruction}]
        self.tools = [
            {"type": "function", "name": n, "description": d, "parameters": s}
            for (n, d), s in ((BASH, BASH_SCHEMA), (SUBMIT, EMPTY_SCHEMA))
        ]

    def ask(self, timeout_s: float) -> list[tuple[str, str, dict[str, Any]]]:
        body = {"model": self.model, "instructions": SYSTEM, "input": self.items, "tools": self.tools}
        output = post(self.url, body, self.headers, timeout_s)["output"]
        self.items += output
        return [
            (o["call_id"], o["name"], parse_arguments(o["arguments"]))
            for o in output
            if o.get("type") == "function_call"
        ]

    def answer(self, results: list[tuple[str, str]]) -> None:
        self.items += [{"type": "function_call_output", "call_id": i, "output": text} for i, text in results]

    def nudge(self) -> None:
        self.items.append({"role": "user", "content": NUDGE})


class Anthropic:
    """Anthropic Messages: tool_use blocks in the assistant turn, tool_result blocks in the next user turn."""

    def __init__(self, args: argparse.Namespace, instruction: str) -> None:
        self.url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
        self.headers = {
            "x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
            "anthropic-version": "2023-06-01",
        }
        self.model = args.model
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": instruction}]
        self.tools = [
            {"name": n, "description": d, "input_schema": s}
            for (n, d), s in ((BASH, BASH_SCHEMA), (SUBMIT, EMPTY_SCHEMA))
        ]

    def ask(self, timeout_s: float) -> list[tuple[str, str, dict[str, Any]]]:
        body = {
            "model": self.model, "max_tokens": 4096, "system": SYSTEM,
            "messages": self.messages, "tools": self.tools,
        }  # fmt: skip
        content = post(self.url, body, self.headers, timeout_s)["content"]
        self.messages.append({"role": "assistant", "content": content})
        return [(b["id"], b["name"], b.get("input") or {}) for b in content if b.get("type") == "tool_use"]

    def answer(self, results: list[tuple[str, str]]) -> None:
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": text} for i, text in results]
        self.messages.append({"role": "user", "content": blocks})

    def nudge(self) -> None:
        self.messages.append({"role": "user", "content": NUDGE})


def parse_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"__invalid__": text}
    return value if isinstance(value, dict) else {"__invalid__": text}


DIALECTS = {"chat": Chat, "responses": Responses, "anthropic": Anthropic}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", choices=sorted(DIALECTS), default="chat")
    parser.add_argument("--model", default="policy")
    parser.add_argument("--max-turns", type=int, default=100)
    parser.add_argument("--max-format-errors", type=int, default=3)
    parser.add_argument("--command-timeout", type=float, default=60.0)
    parser.add_argument("--llm-timeout", type=float, default=3600.0)
    args = parser.parse_args()
    conversation = DIALECTS[args.api](args, sys.stdin.read())
    format_errors = 0
    for _turn in range(args.max_turns):
        calls = conversation.ask(args.llm_timeout)
        if not calls:
            format_errors += 1
            if format_errors >= args.max_format_errors:
                print("giving up: no tool call in the last replies", file=sys.stderr)
                return 3
            conversation.nudge()
            continue
        format_errors = 0
        results = []
        for call_id, name, arguments in calls:
            if name == "submit":
                print("submitted")
                return 0
            if name != "bash" or not isinstance(arguments.get("command"), str):
                results.append((call_id, f"error: unknown tool {name!r} or missing 'command' argument"))
                continue
            results.append((call_id, run_bash(arguments["command"], args.command_timeout)))
        conversation.answer(results)
    print("stopped: turn limit reached", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
