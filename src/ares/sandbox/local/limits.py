"""Resource limits of a local sandbox: cgroups where the machine offers them, rlimits otherwise.

Each requested resource gets the strongest mechanism available, and ``LimitsReport`` says which
one and why, so a limit that cannot be enforced is reported rather than silently ignored:

- memory: the memory cgroup (swap included), else RLIMIT_AS per process (virtual memory);
- pids: the pids cgroup, else RLIMIT_NPROC (counted per user, which a user namespace makes per
  sandbox; sandbox root is never host uid 0, which would be exempt);
- cpus: the cpu cgroup's CFS quota, else nothing (no rlimit caps a CPU share);
- storage: the sandbox's dir (its upper and work dirs) on a tmpfs of that size, else RLIMIT_FSIZE
  per file. tmpfs pages are memory: with both limits set, files count toward the memory limit.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import re
import resource
import signal
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox.base import Resources
from ares.sandbox.local import cgroups

logger = logging.getLogger(__name__)

Mechanism = Literal["cgroup-v1", "cgroup-v2", "rlimit", "tmpfs", "unenforced"]
#: "auto" uses cgroups and a tmpfs where possible; "rlimit" only per-process rlimits (as when unprivileged).
LimitMode = Literal["auto", "rlimit"]
MODE_ENV = "ARES_SANDBOX_LIMITS"
#: ARES's own processes in a sandbox (outer init, pid 1, the spare and the running shepherd) are
#: not counted against the pids limit.
OWN_PROCESSES = 4
#: Commands run with this OOM score, so the kernel kills them when memory runs out...
COMMAND_OOM_SCORE_ADJ = 500
#: ...and never ARES's init and shepherds, which the host sets to this (the kernel's "never").
HELPER_OOM_SCORE_ADJ = -1000
#: What every sandbox gets when its task asks for nothing (a field set by the task wins). The disk
#: tmpfs is memory too, so the memory default leaves room for a full disk plus working memory.
DEFAULT_RESOURCES = Resources(memory_mb=6144, pids=4096, storage_mb=4096)
#: Under rlimits, a default memory limit caps virtual memory this high: runtimes reserve far more
#: address space than they use (a JVM reserves its heap, V8 a 4 GiB cage), so the task's own figure
#: is used only when the task sets one.
DEFAULT_VIRTUAL_MB = 16384
#: Each of stdout and stderr keeps at most this much of a command's output (half head, half tail).
DEFAULT_OUTPUT_BYTES = 4 * 1024 * 1024
CPU_PERIOD_US = 100_000
MIB = 1 << 20
#: A tmpfs with less room than this after a failed command counts as full.
FULL_BYTES = 64 * 1024
NO_SPACE = "No space left on device"
# What a process says when an rlimit refuses it memory or a fork (rlimits leave no counter to read).
_OUT_OF_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|[Oo]ut of memory")
_FORK_REFUSED = re.compile(
    r"fork.*Resource temporarily unavailable|BlockingIOError: \[Errno 11\]"
    r"|cannot start the command: (Resource temporarily unavailable|no process can be forked)"
)
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
CAP_SYS_ADMIN = 21

_libc = ctypes.CDLL(None, use_errno=True)
_logged: set[str] = set()
_logged_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Enforcement:
    """How one resource limit is enforced, and why that way."""

    mechanism: Mechanism
    reason: str


@dataclass(frozen=True, slots=True)
class LimitsReport:
    """Per requested resource, its enforcement; ``None`` where no limit was requested."""

    memory: Enforcement | None = None
    pids: Enforcement | None = None
    cpus: Enforcement | None = None
    storage: Enforcement | None = None

    def items(self) -> list[tuple[str, Enforcement]]:
        return [(f.name, e) for f in fields(self) if (e := getattr(self, f.name)) is not None]

    def __str__(self) -> str:
        return "; ".join(f"{name}: {e.mechanism} ({e.reason})" for name, e in self.items()) or "no limits"


def resolve_mode(mode: str | None) -> LimitMode:
    """The explicit mode, else ``$ARES_SANDBOX_LIMITS``, else "auto"."""
    value = mode if mode is not None else os.environ.get(MODE_ENV) or "auto"
    if value not in ("auto", "rlimit"):
        raise SandboxError(f"unknown limit mode {value!r} (limit_mode or ${MODE_ENV}); use auto or rlimit")
    return "rlimit" if value == "rlimit" else "auto"


def requested(resources: Resources) -> bool:
    return any(getattr(resources, f.name) is not None for f in fields(resources))


def with_defaults(resources: Resources, defaults: Resources) -> Resources:
    """``resources`` with every unset field taken from ``defaults``."""
    return Resources(
        **{
            f.name: getattr(resources, f.name) if getattr(resources, f.name) is not None
            else getattr(defaults, f.name)
            for f in fields(resources)
        }
    )  # fmt: skip


@functools.cache
def can_mount() -> bool:
    """Whether this process may mount a tmpfs (CAP_SYS_ADMIN in its effective set)."""
    try:
        with open("/proc/self/status") as f:
            caps = next(line for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caps.split()[1], 16) >> CAP_SYS_ADMIN & 1)


def unmount_under(path: Path) -> None:
    """Lazily unmount every mount at or below ``path`` (deepest first), e.g. a sandbox's tmpfs."""
    prefix = str(path).rstrip("/")
    with open("/proc/self/mountinfo") as f:
        points = [cgroups.unescape(line.split()[4]) for line in f]
    for point in sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), reverse=True):
        _libc.umount2(point.encode(), MNT_DETACH)


class SandboxLimits:
    """The limits of one sandbox run: decided at construction, applied by ``mount_storage``, ``setup``
    and ``attach``, observed around each command by ``counters``/``limit_hit``, undone by ``release``.
    """

    def __init__(
        self, resources: Resources, mode: LimitMode, *, task_set: Resources | None = None, mapped_mb: int = 0
    ) -> None:
        """``task_set`` is what the task itself set (the rest of ``resources`` are defaults);
        ``mapped_mb`` is the size of the largest program an add-on brings (an agent CLI's binary),
        which RLIMIT_AS, counting mapped files, would charge to the task's memory."""
        self.resources = resources
        self.mapped_mb = mapped_mb
        self.task_set = resources if task_set is None else task_set
        self.mode = mode
        self.report = LimitsReport()
        #: Extra fields of every exec request: rlimits and the command's OOM score.
        self.request_fields: dict[str, Any] = {"oom_score_adj": COMMAND_OOM_SCORE_ADJ}
        self._tmpfs_mb = resources.storage_mb if mode == "auto" and can_mount() else None
        self._tmpfs: Path | None = None
        self._cgroups: cgroups.CgroupSet | None = None
        self._rlimits: list[tuple[int, int]] = []

    # ------------------------------------------------------------------ setup
    def mount_storage(self, sandbox_dir: Path) -> None:
        """Put the (still empty) sandbox dir on a tmpfs of the storage limit's size, if that applies."""
        if self._tmpfs_mb is None:
            return
        options = f"size={self._tmpfs_mb}m,mode=0711".encode()
        target = str(sandbox_dir).encode()
        if _libc.mount(b"tmpfs", target, b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options) != 0:
            err = ctypes.get_errno()
            raise SandboxUnavailableError(
                f"cannot mount a tmpfs for the sandbox's disk limit at {sandbox_dir}: {os.strerror(err)}; "
                f"set {MODE_ENV}=rlimit to limit file sizes with RLIMIT_FSIZE instead"
            )
        self._tmpfs = sandbox_dir

    def setup(self, sandbox_dir: Path, prepared: cgroups.CgroupSet | None = None) -> None:
        """Create the sandbox's cgroups (falling back to rlimits per resource) and fill ``report``.

        ``prepared``: the empty cgroups a pre-launched init already is in (``prelaunch.py``); the
        limits are written into them (and any other controller's made) before pid 1 exists."""
        self._cgroups = prepared or cgroups.CgroupSet(f"ares-{os.getpid()}-{sandbox_dir.name}")
        res = self.resources
        self.report = LimitsReport(
            memory=None if res.memory_mb is None else self._memory(res.memory_mb),
            pids=None if res.pids is None else self._pids(res.pids),
            cpus=None if res.cpus is None else self._cpus(res.cpus),
            storage=None if res.storage_mb is None else self._storage(res.storage_mb),
        )
        if self._rlimits:
            self.request_fields["rlimits"] = self._rlimits
        text = str(self.report)
        with _logged_lock:
            if text not in _logged:
                _logged.add(text)
                logger.info("local sandbox limits: %s", text)

    def _memory(self, mb: int) -> Enforcement:
        size = str(mb * MIB)
        v1 = [("memory.limit_in_bytes", size, True), ("memory.memsw.limit_in_bytes", size, False)]
        v2 = [("memory.max", size, True), ("memory.swap.max", "0", False)]
        enforced = self._cgroup("memory", v1, v2, f"{mb} MiB, swap included")
        if isinstance(enforced, Enforcement):
            return enforced
        virtual = mb if self.task_set.memory_mb is not None else max(mb, DEFAULT_VIRTUAL_MB)
        allowance = f" ({virtual} + {self.mapped_mb} for an add-on's mapped binary)" if self.mapped_mb else ""
        virtual += self.mapped_mb
        self._rlimits.append((resource.RLIMIT_AS, virtual * MIB))
        return Enforcement(
            "rlimit", f"{enforced}; RLIMIT_AS caps each process's virtual memory at {virtual} MiB{allowance}"
        )

    def _pids(self, pids: int) -> Enforcement:
        cap = pids + OWN_PROCESSES
        setting = [("pids.max", str(cap), True)]
        enforced = self._cgroup("pids", setting, setting, f"pids.max {cap}, {OWN_PROCESSES} for ARES itself")
        if isinstance(enforced, Enforcement):
            return enforced
        self._rlimits.append((resource.RLIMIT_NPROC, cap))
        return Enforcement("rlimit", f"{enforced}; RLIMIT_NPROC counts the sandbox user's processes")

    def _cpus(self, cpus: float) -> Enforcement:
        quota = max(1000, round(cpus * CPU_PERIOD_US))
        v1 = [("cpu.cfs_period_us", str(CPU_PERIOD_US), True), ("cpu.cfs_quota_us", str(quota), True)]
        v2 = [("cpu.max", f"{quota} {CPU_PERIOD_US}", True)]
        enforced = self._cgroup("cpu", v1, v2, f"CFS quota {quota} us per {CPU_PERIOD_US} us")
        if isinstance(enforced, Enforcement):
            return enforced
        return Enforcement("unenforced", f"{enforced}; no rlimit caps a CPU share")

    def _storage(self, mb: int) -> Enforcement:
        if self._tmpfs is not None:
            return Enforcement("tmpfs", f"upper dirs on a {mb} MiB tmpfs, held in memory")
        why = "rlimit mode" if self.mode == "rlimit" else "mounting a tmpfs needs CAP_SYS_ADMIN"
        self._rlimits.append((resource.RLIMIT_FSIZE, mb * MIB))
        return Enforcement("rlimit", f"{why}; RLIMIT_FSIZE caps each file, not the total")

    def _cgroup(
        self,
        controller: str,
        v1: list[tuple[str, str, bool]],
        v2: list[tuple[str, str, bool]],
        what: str,
    ) -> Enforcement | str:
        """The cgroup enforcement of one controller, or why there is none."""
        assert self._cgroups is not None
        if self.mode == "rlimit":
            return "rlimit mode"
        hierarchy = cgroups.available()[controller]
        if isinstance(hierarchy, str):
            return hierarchy
        try:
            path = self._cgroups.add(controller, hierarchy, v1 if hierarchy.version == 1 else v2)
        except OSError as exc:
            return f"cannot use a {controller} cgroup under {hierarchy.own}: {exc.strerror or exc}"
        mechanism: Mechanism = "cgroup-v1" if hierarchy.version == 1 else "cgroup-v2"
        return Enforcement(mechanism, f"{what}, in a cgroup under {path.parent}")

    def attach(self, pid: int) -> None:
        """Move the sandbox's init (before it starts anything) into the sandbox's cgroups."""
        if self._cgroups is not None:
            self._cgroups.attach(pid)

    # ------------------------------------------------------------------ per command
    def counters(self) -> tuple[int, int]:
        """(OOM kills, refused forks) so far: cheap reads of the cgroups' event files."""
        if self._cgroups is None:
            return (0, 0)
        return (self._cgroups.counter("memory"), self._cgroups.counter("pids"))

    def counted_every_pressure(self) -> bool:
        """Whether this sandbox's own processes left a count had they killed its init: memory and
        processes are both held by cgroups, and over the sandbox's life their counters show no OOM
        kill and no refused fork. (Rlimits leave no count; without such limits nothing is held.)"""
        report = self.report
        held = report.memory is not None and report.pids is not None
        if not held or not all(e.mechanism.startswith("cgroup") for e in (report.memory, report.pids)):
            return False
        return self.counters() == (0, 0)

    def limit_hit(self, before: tuple[int, int], exit_code: int, timed_out: bool, stderr: str) -> str | None:
        """Which limit stopped or hampered the command that ran since ``before`` was read."""
        oom_kills, refused_forks = self.counters()
        if oom_kills > before[0]:
            return "memory"
        if refused_forks > before[1]:
            return "pids"
        if exit_code == 0 and not timed_out:
            return None
        report = self.report
        if report.storage is not None:
            if report.storage.mechanism == "tmpfs" and (NO_SPACE in stderr or self._tmpfs_full()):
                return "disk"
            if report.storage.mechanism == "rlimit" and (
                exit_code == 128 + signal.SIGXFSZ or "File too large" in stderr
            ):
                return "disk"
        by_rlimit = {name for name, e in report.items() if e.mechanism == "rlimit"}
        if "memory" in by_rlimit and _OUT_OF_MEMORY.search(stderr):
            return "memory"
        if "pids" in by_rlimit and _FORK_REFUSED.search(stderr):
            return "pids"
        return None

    def _tmpfs_full(self) -> bool:
        if self._tmpfs is None:
            return False
        try:
            st = os.statvfs(self._tmpfs)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < FULL_BYTES or st.f_favail == 0

    # ------------------------------------------------------------------ teardown
    def release(self) -> None:
        """Remove the cgroups (their processes must be dead or dying) and unmount the tmpfs. Idempotent."""
        if self._cgroups is not None:
            self._cgroups.remove()
        tmpfs, self._tmpfs = self._tmpfs, None
        if tmpfs is not None and _libc.umount2(str(tmpfs).encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            if err not in (errno.EINVAL, errno.ENOENT):
                logger.warning("cannot unmount the sandbox tmpfs %s: %s", tmpfs, os.strerror(err))
