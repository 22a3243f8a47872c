"""EnvironmentSnapshot: an episode frozen between two steps, in memory or on disk.

On disk a snapshot is a directory: ``snapshot.json`` (everything but the files, versioned) and
``fs/`` (the sandbox's filesystem diff, as the sandbox backend exports it: ``manifest.json`` and
``diff.tar.gz``). Loading never touches a sandbox; the diff is imported when the snapshot is first
restored.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.envs.snapshots.task_codec import task_from_json, task_to_json
from ares.errors import SnapshotError
from ares.llm.openai_chat import request_from_openai, request_to_openai
from ares.llm.types import LLMRequest
from ares.sandbox.capabilities import SnapshotRestoringFactory
from ares.sandbox.snapshots import FilesystemSnapshot
from ares.tasks.model import Task

#: Version of the on-disk layout; a snapshot of another version is refused with the reason.
FORMAT = "ares.env-snapshot/1"
SNAPSHOT_FILE = "snapshot.json"
FS_DIR = "fs"


@dataclass(frozen=True, slots=True, eq=False)
class EnvironmentSnapshot:
    """An episode at step ``step`` (0: FIRST), waiting for the policy's answer to ``observation``.

    ``agent_state`` is the code agent's own (JSON), ``filesystem`` the sandbox's frozen diff,
    ``rng_state`` the environment's task sampler, ``episode`` the episode record so far (limit hits,
    policy cost), ``agent_time_s`` what the agent used of its time limit. ``archive`` is where the
    diff lies on disk for a loaded snapshot (imported on first restore).
    """

    task: Task
    seed: int | None
    step: int
    episode_id: str
    observation: LLMRequest
    agent_state: dict[str, Any]
    filesystem: FilesystemSnapshot
    rng_state: Any
    episode: dict[str, Any]
    agent_time_s: float = 0.0
    archive: Path | None = None
    #: The factory that made the sandbox (exports the diff in ``save``); not part of the file.
    factory: SnapshotRestoringFactory | None = field(default=None, repr=False)

    @property
    def task_id(self) -> str:
        return self.task.id

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "task": task_to_json(self.task),
            "seed": self.seed,
            "step": self.step,
            "episode_id": self.episode_id,
            "observation": request_to_openai(self.observation),
            "agent_state": self.agent_state,
            "filesystem": self.filesystem.to_dict(),
            "rng_state": _jsonable_rng(self.rng_state),
            "episode": self.episode,
            "agent_time_s": self.agent_time_s,
        }

    async def save(self, path: Path | str) -> Path:
        """Write the snapshot to the directory ``path`` (created; must not exist or be empty)."""
        dest = Path(path)
        fs_dir = await asyncio.to_thread(_prepare, dest)
        if self.archive is not None:
            await asyncio.to_thread(shutil.copytree, self.archive, fs_dir)
        elif self.factory is not None:
            await asyncio.to_thread(fs_dir.mkdir)
            await self.factory.export_snapshot(self.filesystem, fs_dir)
        else:
            raise SnapshotError("this snapshot has no sandbox factory to export its files with")
        text = json.dumps(self.to_json(), indent=1)
        await asyncio.to_thread(_write_atomically, dest / SNAPSHOT_FILE, text)
        return dest

    async def discard(self) -> None:
        """Free the sandbox files this snapshot holds (once no sandbox made from it runs); restoring
        it afterwards fails. A saved copy on disk is not affected."""
        if self.factory is not None and self.archive is None:
            await self.factory.discard_snapshot(self.filesystem)

    @classmethod
    def load(cls, path: Path | str) -> EnvironmentSnapshot:
        """Read a snapshot written by ``save`` (its files are imported when it is restored)."""
        src = Path(path)
        file = src / SNAPSHOT_FILE
        try:
            data = json.loads(file.read_text())
        except FileNotFoundError as exc:
            raise SnapshotError(f"{src} holds no snapshot ({SNAPSHOT_FILE} is missing)") from exc
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"cannot read the snapshot {file}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise SnapshotError(
                f"{file} is a snapshot of format {found!r}; this ARES reads {FORMAT!r}. "
                "Restore it with the ARES version that wrote it."
            )
        if not (src / FS_DIR).is_dir():
            raise SnapshotError(f"the snapshot {src} is missing its filesystem diff ({FS_DIR}/)")
        try:
            return cls(
                task=task_from_json(data["task"]),
                seed=data.get("seed"),
                step=int(data["step"]),
                episode_id=str(data["episode_id"]),
                observation=request_from_openai(data["observation"]),
                agent_state=dict(data["agent_state"]),
                filesystem=FilesystemSnapshot.from_dict(data["filesystem"]),
                rng_state=_rng_from_json(data.get("rng_state")),
                episode=dict(data.get("episode") or {}),
                agent_time_s=float(data.get("agent_time_s", 0.0)),
                archive=src / FS_DIR,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"the snapshot {file} is malformed: {type(exc).__name__}: {exc}") from exc


def _jsonable_rng(state: Any) -> Any:
    """``random.Random.getstate()`` as JSON lists (tuples do not survive JSON)."""
    if state is None:
        return None
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _rng_from_json(data: Any) -> Any:
    if data is None:
        return None
    version, internal, gauss = data
    return (version, tuple(internal), gauss)


def _prepare(dest: Path) -> Path:
    """Create the (empty) snapshot directory; the path of its filesystem part."""
    if dest.exists() and any(dest.iterdir()):
        raise SnapshotError(f"cannot save a snapshot to {dest}: the directory is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    return dest / FS_DIR


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
