"""Where episode records go. Files are always valid (atomic replace or whole-line appends).

- ``NullCollector``: records nothing (the default, so wrappers never branch on "no collector").
- ``JsonDirCollector``: ``DIR/<episode_id>.json``, replaced atomically (temp file + rename), so the
  file is always a complete, valid record of the episode so far.
- ``JsonlCollector``: one append-only file of events (``begin``, ``step``, ``end`` lines);
  ``load_episodes`` folds them back into episodes.
- ``MemoryCollector``: the records as objects in this process, for a trainer that consumes each
  batch of rollouts at once (nothing is encoded; ``take`` hands over the ended episodes).

Both file collectors do their encoding and I/O on a background writer thread (``writer.py``): a
step costs the caller a queue append, and the event loop never blocks on a disk. ``flush()`` makes
everything recorded so far durable; ``close()`` (also run at interpreter exit) flushes and stops.
What a collector holds for an episode (its encoded steps, its ``JsonFragments``) is dropped when the
episode ends, so a collector shared by a run of any length holds only its open episodes.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, Self

from ares.records.encoding import JsonFragments, dumps, step_json_text
from ares.records.model import FORMAT, EpisodeRecord, ErrorRecord, StepRecord
from ares.records.writer import BackgroundWriter


class TrajectoryCollector(Protocol):
    """Receives an episode's life as it happens. Calls must be cheap: they run on every step."""

    def begin_episode(self, episode: EpisodeRecord) -> None: ...

    def record_step(self, episode_id: str, step: StepRecord) -> None: ...

    def end_episode(
        self,
        episode_id: str,
        *,
        status: str,
        ended_at: float,
        total_reward: float | None,
        error: ErrorRecord | None = None,
        truncation: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None: ...

    def flush(self) -> None:
        """Return once everything recorded so far is stored durably."""
        ...

    def close(self) -> None:
        """Flush and release resources; the collector takes no more events."""
        ...


class NullCollector:
    """Records nothing."""

    def begin_episode(self, episode: EpisodeRecord) -> None:
        pass

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        pass

    def end_episode(self, episode_id: str, **_: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class MemoryCollector:
    """Keeps every episode as an ``EpisodeRecord`` in memory; ``take()`` hands the ended ones over.

    The objects are the live observations and actions (no JSON round trip), so a trainer reads the
    very token ids and logprobs the policy returned.
    """

    def __init__(self) -> None:
        self._open: dict[str, EpisodeRecord] = {}
        self._steps: dict[str, list[StepRecord]] = {}
        self._ended: list[EpisodeRecord] = []

    def begin_episode(self, episode: EpisodeRecord) -> None:
        self._open[episode.episode_id] = episode
        self._steps[episode.episode_id] = list(episode.steps)

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        self._steps[episode_id].append(step)

    def end_episode(self, episode_id: str, **end: Any) -> None:
        episode = self._open.pop(episode_id)
        metadata = {**episode.metadata, **(end.pop("metadata", None) or {})}
        steps = tuple(self._steps.pop(episode_id))
        self._ended.append(replace(episode, metadata=metadata, steps=steps, **end))

    def take(self) -> list[EpisodeRecord]:
        """The episodes ended since the last call, in the order they ended; they are forgotten here."""
        ended, self._ended = self._ended, []
        return ended

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _WritingCollector:
    """The collector half shared by file collectors: events go to a background writer thread."""

    def __init__(self, name: str, interval_s: float) -> None:
        self._writer = BackgroundWriter(self._write_batch, name=name, interval_s=interval_s)

    def begin_episode(self, episode: EpisodeRecord) -> None:
        self._writer.put(("begin", episode.episode_id, episode))

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        self._writer.put(("step", episode_id, step))

    def end_episode(self, episode_id: str, **end: Any) -> None:
        self._writer.put_soon(("end", episode_id, end))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_batch(self, events: list[tuple[str, str, Any]], durable: bool) -> None:
        raise NotImplementedError


@dataclass(slots=True)
class _OpenEpisode:
    """An episode a JsonDirCollector is writing: its record so far, encoded steps and fragments."""

    episode: EpisodeRecord
    steps: list[str]
    fragments: JsonFragments


class JsonDirCollector(_WritingCollector):
    """One JSON file per episode, valid at all times.

    After each batch of events, every episode they touched has its file atomically replaced (temp
    file + rename), so a reader or a crash never sees a torn file. Steps are encoded once and kept
    until the episode ends; a file is fsync'd when its episode ends and on ``flush()``.
    """

    def __init__(self, directory: Path, *, interval_s: float = 0.05) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open: dict[str, _OpenEpisode] = {}
        super().__init__(f"ares-records:{self.directory.name}", interval_s)

    @property
    def open_episodes(self) -> int:
        """Episodes begun and not yet ended (as far as the writer thread got)."""
        return len(self._open)

    def path(self, episode_id: str) -> Path:
        return self.directory / f"{episode_id}.json"

    def _write_batch(self, events: list[tuple[str, str, Any]], durable: bool) -> None:
        touched: dict[str, bool] = {}  # episode id -> ended in this batch
        for kind, episode_id, payload in events:
            if kind == "begin":
                fragments = JsonFragments()
                steps = [step_json_text(step, fragments) for step in payload.steps]
                self._open[episode_id] = _OpenEpisode(replace(payload, steps=()), steps, fragments)
            elif kind == "step":
                open_episode = self._open[episode_id]
                open_episode.steps.append(step_json_text(payload, open_episode.fragments))
            else:
                open_episode = self._open[episode_id]
                episode = open_episode.episode
                metadata = {**episode.metadata, **(payload.pop("metadata", None) or {})}
                open_episode.episode = replace(episode, metadata=metadata, **payload)
            touched[episode_id] = kind == "end"
        if durable:
            touched = {episode_id: touched.get(episode_id, False) for episode_id in self._open}
        for episode_id, ended in touched.items():
            self._write(episode_id, durable=durable or ended)
            if ended:
                del self._open[episode_id]

    def _write(self, episode_id: str, *, durable: bool) -> None:
        open_episode = self._open[episode_id]
        head = dumps(open_episode.episode.to_json())
        assert head.endswith('"steps":[]}')
        text = head[: -len("[]}")] + "[" + ",".join(open_episode.steps) + "]}"
        target = self.path(episode_id)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)


class JsonlCollector(_WritingCollector):
    """Append-only events in one file; each batch is appended in whole lines and fsync'd."""

    def __init__(self, path: Path, *, interval_s: float = 0.05) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fragments: dict[str, JsonFragments] = {}  # per open episode
        super().__init__(f"ares-records:{self.path.name}", interval_s)

    @property
    def open_episodes(self) -> int:
        """Episodes begun and not yet ended (as far as the writer thread got)."""
        return len(self._fragments)

    def _write_batch(self, events: list[tuple[str, str, Any]], durable: bool) -> None:
        if not events:
            return
        lines = [self._event(kind, episode_id, payload) for kind, episode_id, payload in events]
        with open(self.path, "a") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _event(self, kind: str, episode_id: str, payload: Any) -> str:
        if kind == "begin":
            self._fragments[episode_id] = JsonFragments()
            header = payload.to_json()
            header.pop("steps")
            return dumps({"event": "begin", **header})
        if kind == "step":
            # A step of an episode never begun here is still written, with fragments of its own.
            fragments = self._fragments.get(episode_id)
            if fragments is None:
                fragments = JsonFragments()
            head = dumps({"event": "step", "format": FORMAT, "episode_id": episode_id})
            return f'{head[:-1]},"step":{step_json_text(payload, fragments)}}}'
        self._fragments.pop(episode_id, None)
        error = payload.get("error")
        if error is not None:
            payload["error"] = {"type": error.type, "message": error.message, "traceback": error.traceback}
        return dumps({"event": "end", "format": FORMAT, "episode_id": episode_id, **payload})
