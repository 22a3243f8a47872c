"""Dockerfile parsing: text -> a list of instructions, with Docker's line and heredoc rules.

Only the syntax is handled here (continuations, comments, the ``escape`` directive, JSON vs shell form,
``--flags`` and heredocs); what an instruction means is the builder's business.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ares.errors import ImageBuildError

KNOWN = frozenset(
    {
        "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
        "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
    }
)  # fmt: skip
_DIRECTIVE = re.compile(r"#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_HEREDOC = re.compile(r"<<(-?)(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_FLAG = re.compile(r"--([a-z][a-z-]*)(?:=(\S*))?")


class DockerfileError(ImageBuildError):
    """The Dockerfile cannot be parsed or uses something the local builder does not support."""


@dataclass(frozen=True, slots=True)
class Heredoc:
    """A ``<<NAME`` document: its body, and whether variables in it should be expanded."""

    name: str
    body: str
    expand: bool
    strip_tabs: bool


@dataclass(frozen=True, slots=True)
class Instruction:
    """One Dockerfile instruction. ``args`` is the text after the keyword and flags."""

    keyword: str
    args: str
    line: int
    flags: dict[str, str] = field(default_factory=dict)
    heredocs: tuple[Heredoc, ...] = ()

    @property
    def json_args(self) -> list[str] | None:
        """The exec-form (JSON array) arguments, or None for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        return None

    @property
    def source(self) -> str:
        """A canonical text for cache keys and logs."""
        flags = " ".join(f"--{k}={v}" for k, v in sorted(self.flags.items()))
        docs = "".join(f"\n{h.body}{h.name}" for h in self.heredocs)
        return " ".join(p for p in (self.keyword, flags, self.args) if p) + docs


def parse_dockerfile(text: str) -> list[Instruction]:
    """Parse Dockerfile text. Raises DockerfileError naming the line for malformed input."""
    lines = text.splitlines()
    escape = "\\"
    index = 0
    # Parser directives: only at the very top, before any comment or instruction.
    while index < len(lines):
        match = _DIRECTIVE.match(lines[index])
        if not match:
            break
        if match.group(1).lower() == "escape":
            escape = match.group(2)
            if escape not in ("\\", "`"):
                raise DockerfileError(f"line {index + 1}: escape must be \\ or `, not {escape!r}")
        index += 1
    instructions: list[Instruction] = []
    while index < len(lines):
        raw = lines[index]
        stripped = raw.strip()
        start = index + 1
        index += 1
        if not stripped or stripped.startswith("#"):
            continue
        logical = raw.lstrip()
        while logical.rstrip().endswith(escape) and index <= len(lines):
            logical = logical.rstrip()
            logical = logical[: -len(escape)]
            # Comment and empty lines inside a continuation are dropped, as Docker does.
            while index < len(lines) and (not lines[index].strip() or lines[index].lstrip().startswith("#")):
                index += 1
            if index >= len(lines):
                break
            logical += lines[index].strip()
            index += 1
        keyword, _, rest = logical.rstrip().partition(" ")
        keyword = keyword.upper()
        if keyword not in KNOWN:
            raise DockerfileError(f"line {start}: unknown instruction {keyword!r}")
        flags, rest = _split_flags(rest.strip(), start)
        heredocs: list[Heredoc] = []
        if keyword in ("RUN", "COPY", "ADD"):
            for match in _HEREDOC.finditer(rest):
                strip_tabs, quote, name = match.group(1) == "-", match.group(2), match.group(3)
                body: list[str] = []
                while True:
                    if index >= len(lines):
                        raise DockerfileError(f"line {start}: heredoc <<{name} is never closed")
                    line = lines[index]
                    index += 1
                    check = line.lstrip("\t") if strip_tabs else line
                    if check == name:
                        break
                    body.append(check + "\n")
                heredocs.append(Heredoc(name, "".join(body), expand=not quote, strip_tabs=strip_tabs))
        instructions.append(Instruction(keyword, rest, start, flags, tuple(heredocs)))
    if not instructions:
        raise DockerfileError("the Dockerfile has no instructions")
    if instructions[0].keyword not in ("FROM", "ARG"):
        raise DockerfileError(f"line {instructions[0].line}: a Dockerfile must start with FROM (or ARG)")
    return instructions


def _split_flags(rest: str, line: int) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        word, _, remainder = rest.partition(" ")
        match = _FLAG.fullmatch(word)
        if not match:
            raise DockerfileError(f"line {line}: malformed flag {word!r}")
        flags[match.group(1)] = match.group(2) or ""
        rest = remainder.strip()
    return flags, rest


def split_words(text: str) -> list[str]:
    """Split an argument list on whitespace, honouring double/single quotes (LABEL, ENV, COPY)."""
    words: list[str] = []
    current: list[str] = []
    quote: str | None = None
    has_word = False
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"' and i + 1 < len(text):
                i += 1
                current.append(text[i])
            else:
                current.append(char)
        elif char in "\"'":
            quote, has_word = char, True
        elif char == "\\" and i + 1 < len(text):
            i += 1
            current.append(text[i])
            has_word = True
        elif char.isspace():
            if current or has_word:
                words.append("".join(current))
                current, has_word = [], False
        else:
            current.append(char)
            has_word = True
        i += 1
    if quote:
        raise DockerfileError(f"unterminated quote in {text!r}")
    if current or has_word:
        words.append("".join(current))
    return words


def key_values(text: str, keyword: str, line: int) -> list[tuple[str, str]]:
    """``ENV``/``LABEL``/``ARG`` pairs: ``K=V K2="v 2"`` or the legacy ``K value with spaces``."""
    words = split_words(text)
    if not words:
        raise DockerfileError(f"line {line}: {keyword} needs at least one argument")
    if "=" not in words[0]:
        if keyword == "ARG":
            return [(w, "") if "=" not in w else tuple(w.split("=", 1)) for w in words]  # type: ignore[misc]
        name, _, value = text.strip().partition(" ")
        if not value.strip():
            raise DockerfileError(f"line {line}: {keyword} {name} has no value")
        return [(name, " ".join(split_words(value)))]
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not name:
            raise DockerfileError(f"line {line}: {keyword} expects KEY=VALUE, got {word!r}")
        pairs.append((name, value))
    return pairs


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(text: str, variables: dict[str, str]) -> str:
    """Docker's variable substitution: $V, ${V}, ${V:-default}, ${V:+alternative}; \\$ stays literal."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        op, word = match.group(2), match.group(3) or ""
        value = variables.get(name)
        if op in (":-", "-"):
            return value if value else word
        if op in (":+", "+"):
            return word if value else ""
        return value or ""

    parts = text.split("\\$")
    return "$".join(_VAR.sub(replace, part) for part in parts)
