"""A command's processes and output, as its shepherd sees them: bounded capture of stdout/stderr,
draining what background processes still write, and killing and reaping the command's whole
process tree. Standard library only."""

import contextlib
import os
import select
import signal
import time

CHUNK = 1 << 16


# After a command exits, output still arriving from its background processes is read for this long.
DRAIN_S = 0.05


# ---------------------------------------------------------------------- shepherds
def descendants(ancestor: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if fields[0] != b"Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = [], {ancestor}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found.extend(frontier)
    return found


def kill_tree(reaped: dict[int, int]) -> None:
    """SIGKILL every descendant of this (subreaper) process until none is left."""
    for _ in range(1000):
        victims = descendants(os.getpid())
        if not victims:
            reap(reaped)  # zombies hold their pids (against a pids limit) until reaped
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reap(reaped)
        time.sleep(0.001)


def reap(reaped: dict[int, int]) -> None:
    """Collect exited children without blocking, remembering their statuses."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reaped[pid] = status


class Capture:
    """A stream's output kept as a bounded head and tail; what falls in between is only counted."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        if self.limit is None:
            self.head += data
            return
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            keep = self.limit - half
            if len(self.tail) > 2 * keep:
                self.dropped += len(self.tail) - keep
                del self.tail[: len(self.tail) - keep]

    def value(self) -> tuple[bytes, int]:
        keep = 0 if self.limit is None else self.limit - self.limit // 2
        if len(self.tail) > keep:
            self.dropped += len(self.tail) - keep
            del self.tail[: len(self.tail) - keep]
        if not self.dropped:
            return bytes(self.head + self.tail), 0
        marker = f"\n[ares: {self.dropped} bytes of output omitted]\n".encode()
        return bytes(self.head + marker + self.tail), self.dropped


def collect(child: int, pipes: list[int], timeout: float | None, limit: int | None) -> tuple:
    """Read the command's output until it exits (or times out), then what is left of it, briefly."""
    captures = {fd: Capture(limit) for fd in pipes}
    poller = select.poll()
    for fd in pipes:
        poller.register(fd, select.POLLIN)
    pidfd = os.pidfd_open(child)
    poller.register(pidfd, select.POLLIN)
    open_pipes = set(pipes)
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out, exited = False, False
    reaped: dict[int, int] = {}
    while not exited:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = poller.poll(wait)
        if not events and deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            kill_tree(reaped)
            break
        for fd, _ in events:
            if fd == pidfd:
                exited = True
            elif not read_into(fd, captures[fd]):
                poller.unregister(fd)
                open_pipes.discard(fd)
    os.close(pidfd)
    drain_available(open_pipes, captures)
    status = reaped[child] if child in reaped else os.waitpid(child, 0)[1]
    return status, timed_out, captures, open_pipes


def read_into(fd: int, capture: Capture) -> bool:
    """Read one chunk; False at end of stream."""
    try:
        data = os.read(fd, CHUNK)
    except BlockingIOError:
        return True
    if not data:
        return False
    capture.add(data)
    return True


def drain_available(open_pipes: set[int], captures: dict[int, Capture]) -> None:
    """Output the command wrote before exiting is still in the pipes: read it without waiting for
    background processes that hold them open (for at most DRAIN_S)."""
    deadline = time.monotonic() + DRAIN_S
    for fd in list(open_pipes):
        os.set_blocking(fd, False)
        while time.monotonic() < deadline:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                open_pipes.discard(fd)
                break
            captures[fd].add(data)


def discard_until_closed(open_pipes: set[int]) -> None:
    """Background processes still hold the command's output pipes: keep reading them (and reaping
    what this subreaper inherits) so they never block on a full pipe, until they close."""
    if not open_pipes:
        return
    # The command's status is collected: from now on the kernel reaps this subreaper's children at
    # once, so exited background processes do not hold pids (against the pids limit) as zombies.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    reap({})
    for fd in open_pipes:
        os.set_blocking(fd, True)
    while open_pipes:
        ready, _, _ = select.select(list(open_pipes), [], [])
        for fd in ready:
            if not os.read(fd, CHUNK):
                open_pipes.discard(fd)
