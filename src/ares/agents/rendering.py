"""What the built-in agents share: template rendering and turning command results into text."""

from __future__ import annotations

from functools import cache, lru_cache
from importlib import resources
from typing import Any

import jinja2

from ares.sandbox.base import ExecResult, Resources

_JINJA = jinja2.Environment(
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False
)


@lru_cache(maxsize=64)
def compile_template(source: str) -> jinja2.Template:
    """Templates are compiled once per distinct source, not once per episode."""
    return _JINJA.from_string(source)


def render(source: str, **context: Any) -> str:
    return compile_template(source).render(**context).strip()


@cache
def default_template(name: str) -> str:
    """The source of a template shipped in ``ares/agents/templates`` (e.g. ``"bash_system.j2"``)."""
    return (resources.files("ares.agents") / "templates" / name).read_text(encoding="utf-8")


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail: errors tend to be at the end, context at the start."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - max_chars} characters elided ...]\n{text[-tail:]}"


def combine_output(result: ExecResult) -> str:
    """stdout, then stderr under a marker when both have text (their interleaving is not known)."""
    stdout, stderr = result.stdout, result.stderr
    if stdout and stderr:
        return f"{stdout}{'' if stdout.endswith(chr(10)) else chr(10)}[stderr]\n{stderr}"
    return stdout or stderr


# limit_hit -> (what happened, the limit's name, its size in the task's resources, unit)
_LIMIT_NOTES = {
    "memory": ("the command was stopped", "memory limit", "memory_mb", "MB"),
    "pids": ("a fork failed", "process limit", "pids", "processes"),
    "disk": ("a write failed", "disk limit", "storage_mb", "MB"),
    # The command ran to its end; only the middle of its output was dropped (the sandbox keeps
    # a head and a tail of each stream).
    "output": ("the middle of the output was dropped", "output limit", "", ""),
}


def limit_note(result: ExecResult, resources: Resources) -> str | None:
    """A line telling the model which resource limit hit its command, so it can change course."""
    if result.limit_hit is None:
        return None
    effect, name, field_name, unit = _LIMIT_NOTES.get(
        result.limit_hit, ("the command was stopped", f"{result.limit_hit} limit", "", "")
    )
    amount = getattr(resources, field_name, None)
    size = f" of {amount} {unit}" if amount is not None else ""
    return f"[{effect}: {name}{size} reached]"


def command_output(result: ExecResult, resources: Resources, max_chars: int) -> str:
    """A command's output as the model sees it: both streams, cut in the middle, limit note last."""
    output = truncate_middle(combine_output(result), max_chars).rstrip("\n")
    if note := limit_note(result, resources):
        output = f"{output}\n{note}".lstrip("\n")
    return output
