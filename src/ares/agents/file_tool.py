"""The tool agent's file tool: view, create, replace a unique string, insert at a line.

Every operation goes through the Sandbox API (``exec``, ``read_file``, ``upload``), so it works on any
backend. A mistake the model can fix (a missing file, a non-unique match, a binary or huge file)
raises ``ToolCallError``, whose message goes back to the model as the tool's result.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ares.agents.rendering import combine_output, truncate_middle
from ares.errors import SandboxCrashedError, SandboxError
from ares.sandbox.base import Sandbox

FILE_TOOL = "file"

FILE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FILE_TOOL,
        "description": (
            "View, create or edit a file. `view` shows a file with line numbers (or lists a directory "
            "two levels deep); `create` writes a whole file, creating missing directories; `replace` "
            "swaps `old_text`, which must occur exactly once, for `new_text`; `insert` puts `content` "
            "after line `line` (0 = at the top). Paths are relative to the working directory."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "replace", "insert"]},
                "path": {"type": "string", "description": "The file or directory."},
                "content": {"type": "string", "description": "create: the whole file; insert: the text."},
                "old_text": {"type": "string", "description": "replace: the exact text to find."},
                "new_text": {"type": "string", "description": "replace: what replaces it."},
                "line": {"type": "integer", "description": "insert: the line after which to insert."},
                "start_line": {"type": "integer", "description": "view: first line to show (from 1)."},
                "end_line": {"type": "integer", "description": "view: last line to show (-1: the end)."},
            },
            "required": ["command", "path"],
            "additionalProperties": False,
        },
    },
}

#: Which arguments each command needs beyond ``command`` and ``path``.
_NEEDS = {
    "view": (),
    "create": ("content",),
    "replace": ("old_text", "new_text"),
    "insert": ("line", "content"),
}
_CONTEXT_LINES = 3  # shown around an edit, so the model sees its result without another view
_LISTING_DEPTH = 2


_Kind = Literal["file", "dir", "other", "missing"]
_KINDS: tuple[_Kind, ...] = ("file", "dir", "other", "missing")


class ToolCallError(Exception):
    """A tool call the model can fix; the message tells it how."""


@dataclass(frozen=True, slots=True)
class _Target:
    """What a path names in the sandbox: ``kind`` is file, dir, other or missing."""

    path: str
    kind: _Kind
    size: int = 0
    mode: str = ""
    real: str = ""


@dataclass(frozen=True, slots=True)
class FileTool:
    """Runs one file-tool call against ``sandbox``; relative paths start at ``workdir``."""

    sandbox: Sandbox
    workdir: str
    timeout_s: float
    max_output_chars: int
    max_file_bytes: int

    async def __call__(self, args: Mapping[str, Any]) -> str:
        command = args["command"]
        missing = [name for name in _NEEDS[command] if name not in args]
        if missing:
            raise ToolCallError(f"`{command}` needs {' and '.join(f'`{m}`' for m in missing)}")
        if not args["path"].strip():
            raise ToolCallError("`path` is empty")
        target = await self._probe(posixpath.join(self.workdir, args["path"]))
        if command == "view":
            return await self._view(target, args.get("start_line"), args.get("end_line"))
        if command == "create":
            return await self._create(target, args["content"])
        if command == "replace":
            return await self._replace(target, args["old_text"], args["new_text"])
        return await self._insert(target, args["line"], args["content"])

    async def _view(self, target: _Target, start: int | None, end: int | None) -> str:
        if target.kind == "dir":
            if start is not None or end is not None:
                raise ToolCallError(f"{target.path} is a directory: `start_line`/`end_line` apply to files")
            return await self._listing(target)
        lines = _lines(await self._read(target))
        first = 1 if start is None else start
        last = len(lines) if end is None or end == -1 else min(end, len(lines))
        if first < 1 or (end is not None and end != -1 and end < first):
            raise ToolCallError(
                f"bad line range {first}..{end}: lines count from 1 and end_line >= start_line"
            )
        if not lines:
            return f"{target.path} is empty."
        if first > len(lines):
            raise ToolCallError(f"start_line {first} is past the end of {target.path} ({len(lines)} lines)")
        shown = _numbered(lines, first, last)
        if len(shown) > self.max_output_chars:
            shown = truncate_middle(shown, self.max_output_chars)
            shown += "\n[the file is long: view a part with start_line and end_line]"
        return shown

    async def _listing(self, target: _Target) -> str:
        # Directories get a trailing slash; hidden entries are skipped (view them by name).
        script = (
            f"cd {shlex.quote(target.real)} && find . -mindepth 1 -maxdepth {_LISTING_DEPTH} "
            "! -path '*/.*' \\( -type d -exec printf '%s/\\n' {} + -o -print \\)"
        )
        result = await self.sandbox.exec(script, cwd="/", timeout_s=self.timeout_s)
        if result.exit_code != 0 or result.timed_out:
            raise ToolCallError(f"cannot list {target.path}: {result.stderr.strip() or 'listing failed'}")
        entries = sorted(line.removeprefix("./") for line in result.stdout.splitlines() if line)
        if not entries:
            return f"{target.path} is an empty directory."
        listing = truncate_middle("\n".join(entries), self.max_output_chars)
        return f"{target.path} ({_LISTING_DEPTH} levels deep, hidden entries left out):\n{listing}"

    async def _create(self, target: _Target, content: str) -> str:
        if target.kind == "dir":
            raise ToolCallError(f"{target.path} is a directory")
        if target.kind == "other":
            raise ToolCallError(f"{target.path} is not a regular file")
        await self._write(target, content)
        verb = "Overwrote" if target.kind == "file" else "Created"
        return f"{verb} {target.path} ({_count(len(_lines(content)))})."

    async def _replace(self, target: _Target, old: str, new: str) -> str:
        if not old:
            raise ToolCallError("`old_text` is empty; to add text use `insert`, to rewrite a file `create`")
        text = await self._read(target)
        count = text.count(old)
        if count == 0:
            raise ToolCallError(
                f"`old_text` was not found in {target.path}. It must match the file exactly, whitespace and "
                "indentation included: view the file and copy the text from it"
            )
        if count > 1:
            lines = _match_lines(text, old)
            raise ToolCallError(
                f"`old_text` occurs {count} times in {target.path} (at lines {', '.join(map(str, lines))}); "
                "include more of the surrounding text so that it matches once"
            )
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old) :]
        await self._write(target, updated)
        first = text.count("\n", 0, at) + 1
        return self._edited(target, updated, first, first + new.count("\n"), "Replaced the text in")

    async def _insert(self, target: _Target, line: int, content: str) -> str:
        if not content:
            raise ToolCallError("`content` is empty: nothing to insert")
        text = await self._read(target)
        total = len(_lines(text))
        if not 0 <= line <= total:
            raise ToolCallError(
                f"`line` must be between 0 and {total} (the lines of {target.path}), not {line}"
            )
        at = _offset_after(text, line)
        head = text[:at] if not at or text[at - 1] == "\n" else text[:at] + "\n"
        block = content if content.endswith("\n") else content + "\n"
        updated = head + block + text[at:]
        await self._write(target, updated)
        added = len(_lines(block))
        return self._edited(
            target, updated, line + 1, line + added, f"Inserted {_count(added)} after line {line} of"
        )

    def _edited(self, target: _Target, text: str, first: int, last: int, what: str) -> str:
        """The edit's result with a few lines around it, so the model need not view the file again."""
        lines = _lines(text)
        if not lines:
            return f"{what} {target.path}, which is now empty."
        start, end = max(1, first - _CONTEXT_LINES), min(len(lines), max(first, last) + _CONTEXT_LINES)
        snippet = truncate_middle(_numbered(lines, start, end), self.max_output_chars)
        return f"{what} {target.path}. Lines {start}-{end} now read:\n{snippet}"

    async def _probe(self, path: str) -> _Target:
        path = posixpath.normpath(path)
        quoted = shlex.quote(path)
        script = (
            f"if [ -d {quoted} ]; then echo dir; "
            f"elif [ -f {quoted} ]; then printf 'file %s %s %s\\n' "
            f'"$(stat -L -c %s -- {quoted})" "$(stat -L -c %a -- {quoted})" "$(readlink -f -- {quoted})"; '
            f"elif [ -e {quoted} ] || [ -L {quoted} ]; then echo other; else echo missing; fi"
        )
        result = await self.sandbox.exec(script, cwd="/", timeout_s=self.timeout_s)
        fields = result.stdout.rstrip("\n").split(" ", 3)
        kind = next((k for k in _KINDS if k == fields[0]), None)
        if result.exit_code != 0 or kind is None:
            raise ToolCallError(f"cannot inspect {path}: {result.stderr.strip() or result.stdout.strip()}")
        if kind == "file" and len(fields) == 4 and fields[1].isdigit():
            return _Target(path, "file", int(fields[1]), fields[2], fields[3] or path)
        return _Target(path, kind, real=path)

    async def _read(self, target: _Target) -> str:
        if target.kind == "missing":
            raise ToolCallError(f"{target.path} does not exist")
        if target.kind != "file":
            raise ToolCallError(
                f"{target.path} is a {'directory' if target.kind == 'dir' else 'special file'}"
            )
        if target.size > self.max_file_bytes:
            raise ToolCallError(
                f"{target.path} is {target.size} bytes, over the file tool's limit of {self.max_file_bytes}; "
                "use bash on it (e.g. grep -n, or sed -n '100,200p' for a range of lines)"
            )
        try:
            data = await self.sandbox.read_file(target.real)
        except SandboxCrashedError:
            raise
        except SandboxError as error:
            raise ToolCallError(str(error)) from error
        binary = ToolCallError(
            f"{target.path} is a binary file, not UTF-8 text; inspect it with bash (xxd, od)"
        )
        if b"\0" in data:
            raise binary
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise binary from None

    async def _write(self, target: _Target, text: str) -> None:
        """Upload the new content over the real file (links are followed), keeping its permissions.

        Uploads stamp files with the epoch; the file is touched after, or tools that trust mtimes
        (Python's bytecode cache, make) would miss an edit that kept the file's size.
        """
        real = target.real or target.path
        directory, name = posixpath.split(real)
        quoted = shlex.quote(real)
        chmod = (
            f"chmod {shlex.quote(target.mode)} -- {quoted} && "
            if target.kind == "file" and target.mode
            else ""
        )
        try:
            await self.sandbox.upload({name: text}, directory or "/")
            result = await self.sandbox.exec(
                f"{chmod}touch -c -- {quoted}", cwd="/", timeout_s=self.timeout_s
            )
        except SandboxCrashedError:
            raise
        except SandboxError as error:
            raise ToolCallError(f"cannot write {target.path}: {error}") from error
        if not result.ok:
            raise ToolCallError(
                f"{target.path} was written but not restamped: {combine_output(result).strip()}"
            )


def _lines(text: str) -> list[str]:
    """Lines as ``sed`` and ``cat -n`` count them: a final newline does not start another line."""
    if not text:
        return []
    return text.removesuffix("\n").split("\n")


def _count(lines: int) -> str:
    return f"{lines} line{'' if lines == 1 else 's'}"


def _numbered(lines: list[str], first: int, last: int) -> str:
    return "\n".join(f"{n:>6}\t{lines[n - 1].rstrip(chr(13))}" for n in range(first, last + 1))


def _offset_after(text: str, line: int) -> int:
    """Where line ``line + 1`` starts (the end of the text when there is none)."""
    at = 0
    for _ in range(line):
        newline = text.find("\n", at)
        if newline < 0:
            return len(text)
        at = newline + 1
    return at


def _match_lines(text: str, old: str) -> list[int]:
    found, at = [], text.find(old)
    while at >= 0:
        found.append(text.count("\n", 0, at) + 1)
        at = text.find(old, at + len(old))
    return found
