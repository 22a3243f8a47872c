"""Reversing a unified diff, so a dataset that ships the bug (SWE-smith) also yields the fix.

SWE-smith rows carry the diff that breaks a working repository; applying it in reverse is the fix.
Reversing on the host (rather than ``git apply -R`` in the sandbox) lets the oracle and every
consumer treat ``SweInstance.patch`` the same way for every format.
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$")
_SWAPS = (
    ("--- ", "+++ "),
    ("new file mode ", "deleted file mode "),
    ("rename from ", "rename to "),
    ("copy from ", "copy to "),
    ("old mode ", "new mode "),
)


def reverse_patch(diff: str) -> str:
    """The unified (git) diff that undoes ``diff``: old and new sides swapped, line by line.

    Handles file headers, hunk ranges, added/removed lines, new/deleted files, renames and mode
    changes. Binary patches are not reversible as text and raise ``ValueError``.
    """
    out: list[str] = []
    lines = diff.splitlines(keepends=True)
    removed: list[str] = []  # a change block, reordered so removals come first as diff writes them
    added: list[str] = []
    old_left = new_left = 0  # lines still owed by the current hunk: its body is never a header
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        if old_left > 0 or new_left > 0:
            sign = body[:1]
            if sign == "+":
                new_left -= 1
                removed.append("-" + line[1:])
            elif sign == "-":
                old_left -= 1
                added.append("+" + line[1:])
            else:  # context (" " or an empty line) or "\\ No newline at end of file"
                if sign != "\\":
                    old_left -= 1
                    new_left -= 1
                    _flush(out, removed, added)
                    out.append(line)
                else:  # the marker belongs to the line just before it, on its side
                    (added or removed or out).append(line)
            if old_left <= 0 and new_left <= 0:
                _flush(out, removed, added)
        elif body.startswith("GIT binary patch"):
            raise ValueError("binary patches cannot be reversed as text")
        elif body.startswith("diff --git "):
            out.append(_swap_git_header(body) + end)
        elif body.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            nxt = lines[i + 1].rstrip("\r\n")
            out.append("--- " + _side(nxt[4:], "a/") + lines[i + 1][len(nxt) :])
            out.append("+++ " + _side(body[4:], "b/") + end)
            i += 1
        elif match := _HUNK.match(body):
            old, new, rest = match.groups()
            old_left, new_left = _count(old), _count(new)
            out.append(f"@@ -{new} +{old} @@{rest}{end}")
        elif body.startswith("index ") and ".." in body:
            out.append(_swap_index(body) + end)
        else:
            out.append(_swap_metadata(body) + end)
        i += 1
    _flush(out, removed, added)
    return "".join(out)


def _flush(out: list[str], removed: list[str], added: list[str]) -> None:
    out.extend(removed)
    out.extend(added)
    removed.clear()
    added.clear()


def _count(span: str) -> int:
    """Lines in a hunk side: "12,3" -> 3, "12" -> 1."""
    return int(span.partition(",")[2] or 1) if "," in span else 1


def _side(path: str, prefix: str) -> str:
    """A ---/+++ path moved to the other side, its a/ or b/ prefix following it."""
    if path.startswith(("a/", "b/")):
        return prefix + path[2:]
    return path


def _swap_git_header(body: str) -> str:
    parts = body[len("diff --git ") :].split(" ")
    if len(parts) == 2 and parts[0].startswith("a/") and parts[1].startswith("b/"):
        return f"diff --git a/{parts[1][2:]} b/{parts[0][2:]}"
    return body  # paths with spaces: the ---/+++ lines carry the truth


def _swap_index(body: str) -> str:
    words = body.split(" ")
    old, _, new = words[1].partition("..")
    return " ".join(["index", f"{new}..{old}", *words[2:]])


def _swap_metadata(body: str) -> str:
    for first, second in _SWAPS:
        if body.startswith(first):
            return second + body[len(first) :]
        if body.startswith(second):
            return first + body[len(second) :]
    return body
