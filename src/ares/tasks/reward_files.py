"""What a task's tests leave in /logs/verifier, read on the host: the reward and every other file.

The directory was written by code the agent may influence, so it is read like untrusted input:
no symlink is followed, only regular files are opened (a FIFO cannot block the read), and every
size is bounded. Reward parsing is strict: JSON wins over text, and a reward that is missing,
malformed or not finite is an error, never a silent 0.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ares.errors import VerifierError

LOGS_DIR = "/logs/verifier"
#: A reward file larger than this is refused (a reward is a few bytes).
MAX_REWARD_BYTES = 64 * 1024
#: Bounds on the other files kept with the episode.
MAX_FILES = 64
MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 1024 * 1024
REWARD_FILES = ("reward.json", "reward.txt")


@dataclass(frozen=True, slots=True)
class LogFiles:
    """The files of a verifier run: relative path -> text (long files keep their head and tail),
    and what was left out (over the bounds, or not a regular file)."""

    files: dict[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()


def parse_reward_json(text: str) -> tuple[float, dict[str, float]]:
    """reward.json is an object of named numbers; ``reward`` is the scalar, else the terms' sum."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VerifierError(f"{LOGS_DIR}/reward.json is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not data:
        raise VerifierError(f"{LOGS_DIR}/reward.json must be a non-empty JSON object of named numbers")
    terms: dict[str, float] = {}
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VerifierError(f"reward.json term {name!r} is {value!r}, not a number")
        terms[name] = _finite(float(value), f"reward.json term {name!r}")
    return terms.get("reward", math.fsum(terms.values())), terms


def parse_reward_txt(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError as exc:
        raise VerifierError(f"{LOGS_DIR}/reward.txt must hold one number, got {text.strip()[:80]!r}") from exc
    return _finite(value, "reward.txt")


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise VerifierError(f"{what} is {value}, not a finite number")
    return value


def reward_from(texts: dict[str, str]) -> tuple[float, dict[str, float]] | None:
    """The reward in ``texts`` (name -> content of reward.json / reward.txt), None when neither."""
    if "reward.json" in texts:
        return parse_reward_json(texts["reward.json"])
    if "reward.txt" in texts:
        return parse_reward_txt(texts["reward.txt"]), {}
    return None


def read_rewards(logs: Path) -> dict[str, str]:
    """reward.json and reward.txt from the host dir ``logs`` (those present)."""
    found: dict[str, str] = {}
    for name in REWARD_FILES:
        path = logs / name
        data = _read_regular(path, MAX_REWARD_BYTES, missing_ok=True)
        if data is None:
            continue
        if os.stat(path, follow_symlinks=False).st_size > MAX_REWARD_BYTES:
            raise VerifierError(f"{LOGS_DIR}/{name} is over {MAX_REWARD_BYTES} bytes; a reward is one number")
        found[name] = data.decode("utf-8", "replace")
    return found


def read_log_files(logs: Path) -> LogFiles:
    """Every regular file below ``logs`` (sorted, bounded), as text for the episode record."""
    files: dict[str, str] = {}
    skipped: list[str] = []
    total = 0
    for rel, kind in _walk(logs):
        if kind != "file" or len(files) >= MAX_FILES or total >= MAX_TOTAL_BYTES:
            skipped.append(rel if kind == "file" else f"{rel} ({kind})")
            continue
        try:
            data = _read_regular(logs / rel, min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total))
        except VerifierError:
            skipped.append(f"{rel} (unreadable)")
            continue
        assert data is not None
        total += len(data)
        files[rel] = data.decode("utf-8", "replace")
    return LogFiles(files, tuple(skipped))


def _walk(top: Path, prefix: str = "", budget: list[int] | None = None) -> list[tuple[str, str]]:
    """(relative path, kind) of the entries below ``top``, without following symlinks; at most
    ``4 * MAX_FILES`` entries are looked at."""
    budget = budget if budget is not None else [4 * MAX_FILES]
    out: list[tuple[str, str]] = []
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if budget[0] <= 0:
            break
        budget[0] -= 1
        rel = prefix + os.fsencode(entry.name).decode("utf-8", "backslashreplace")
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            out.extend(_walk(Path(entry.path), rel + "/", budget))
        elif stat.S_ISREG(mode):
            out.append((rel, "file"))
        else:
            out.append((rel, "symlink" if stat.S_ISLNK(mode) else "special file"))
    return out


def _read_regular(path: Path, limit: int, missing_ok: bool = False) -> bytes | None:
    """``path``'s bytes if it is a regular file, its head and tail (with a marker) when it is longer
    than ``limit``; a symlink or FIFO is an error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise VerifierError(f"{path.name} vanished while it was read") from None
    except OSError as exc:
        why = f"{LOGS_DIR}/{path.name} cannot be read ({exc.strerror}); it must be a regular file"
        raise VerifierError(why) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise VerifierError(f"{LOGS_DIR}/{path.name} is not a regular file")
        if st.st_size <= limit:
            return os.pread(fd, limit + 1, 0)[:limit]
        half = limit // 2
        omitted = f"\n[ares: {st.st_size - 2 * half} bytes of this file omitted]\n".encode()
        return os.pread(fd, half, 0) + omitted + os.pread(fd, half, st.st_size - half)
    finally:
        os.close(fd)
