"""How one command runs in a container: the in-container wrapper, the sweeper and the output stream.

``docker exec`` alone neither kills a command's process tree on timeout nor returns while a
background process still holds its stdout (Docker waits for the pipe to close). So every command
runs under a small POSIX ``sh`` wrapper that

- sends its output to files, so background processes never hold the exec's pipes;
- runs it under ``timeout -s KILL``, which kills its whole process group without forking, even when
  a fork bomb has used up the pids limit;
- tags it with ``ARES_EXEC=<token>`` in its environment, which every descendant inherits, so the
  sweeper can afterwards find and kill processes that left the group (``setsid``, daemons);
- raises its OOM score, so the kernel kills the command rather than the container's pid 1;
- reads the cgroup's OOM-kill and pids-limit counters before and after, and ends stdout with a
  trailer ``ARES-EXIT-<token> <exit code> <oom kills> <fork refusals>``.

A verifier fork in ``full`` mode runs ``TRUSTED_WRAPPER`` instead: the same steps with bash builtins
only, on the image's own bash from a trusted shell bundle (``trusted.py``), around an exact command
line; its sweeper is ``SWEEP``'s bash branch on that bash.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import docker
import docker.errors
import requests.exceptions

from ares.sandbox.docker.client import api_message, run_blocking

log = logging.getLogger("ares.sandbox.docker.sandbox")  # the sandbox's log, where commands are
#: What the SDK raises when the engine or the container is gone.
API_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)

WRAPPER = r"""
t=$1; d=/tmp/.ares-exec-$t
mkdir -p "$d" || exit 125
{ echo 500 > /proc/self/oom_score_adj; } 2>/dev/null
counters() {
  o=0; p=0
  for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && o=$v; done < "$f"; fi
  done
  for f in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = max ] && p=$v; done < "$f"; fi
  done
}
counters; o0=$o; p0=$p
exec 3>&2 2>/dev/null  # the wrapper's own job notices ("Killed") must not reach the caller
if cd -- "$2" 2>/dev/null; then
  if command -v bash >/dev/null 2>&1; then s=bash; else s=sh; fi
  if [ -f "$d/in" ]; then i=$d/in; else i=/dev/null; fi
  if [ -n "$3" ] && command -v timeout >/dev/null 2>&1; then set -- timeout -s KILL "$3" "$s" -c "$4"
  else set -- "$s" -c "$4"; fi
  # Redirect inside a subshell that execs the command: dash prints its "Killed" job notice to the
  # stderr in effect where it waits, which here is the wrapper's (silenced above), not the command's.
  (ARES_EXEC=$t; export ARES_EXEC; exec "$@" < "$i" > "$d/out" 2> "$d/err")
  rc=$?
else
  : > "$d/out"; echo "ares sandbox: cannot use working directory '$2': no such directory" > "$d/err"; rc=126
fi
counters
cat "$d/out"; cat "$d/err" >&3
printf '\nARES-EXIT-%s %s %s %s\n' "$t" "$rc" "$((o - o0))" "$((p - p0))"
rm -rf "$d"
exit "$rc"
"""

#: The sweeper's bash branch, builtins only: it forks nothing (a fork bomb may still hold the pids
#: limit). ``$1`` is the token.
SWEEP_BASH = r"""
  n=1; r=0
  while (( n > 0 && r < 20 )); do
    n=0; r=$((r + 1))
    for e in /proc/[0-9]*/environ; do
      while IFS= read -r -d "" v; do
        if [[ $v == "ARES_EXEC=$1" ]]; then p=${e#/proc/}; kill -9 "${p%/environ}" && n=$((n + 1)); break; fi
      done 2>/dev/null < "$e"
    done 2>/dev/null
  done"""

#: Kills every process whose environment holds ARES_EXEC=<token>, in rounds until none is left.
#: With bash it forks nothing (a fork bomb may still hold the pids limit); else it needs tr and grep.
SWEEP = (
    "\nif command -v bash >/dev/null 2>&1; then exec bash -c '"
    + SWEEP_BASH
    + r"""' ares-sweep "$1"; fi
n=1; r=0
while [ "$n" -gt 0 ] && [ "$r" -lt 20 ]; do
  n=0; r=$((r + 1))
  for e in /proc/[0-9]*/environ; do
    if tr '\0' '\n' < "$e" 2>/dev/null | grep -qxF "ARES_EXEC=$1"; then
      p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null && n=$((n + 1))
    fi
  done
done
"""
)

#: The wrapper of a verifier fork that must not run any program of its container (docker ``full``
#: mode): run by the image's own bash from the trusted shell bundle (``trusted.py``), with builtins
#: only. Arguments: token, scratch dir (made by the archive API), working dir, timeout, then the
#: exact command line. Each job gets a process group of its own (``set -m``): a timer job that
#: sleeps with ``read -t`` SIGKILLs the command's whole group, as ``timeout -s KILL`` does (exit
#: code 137). The output files are opened before the command starts and read back through
#: /proc/self/fd, so the command cannot swap them; ``copy`` passes bytes, NULs included.
TRUSTED_WRAPPER = r"""
t=$1 d=$2 w=$3 l=$4; shift 4
{ echo 500 > /proc/self/oom_score_adj; } 2>/dev/null
counters() {
  o=0; p=0
  for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [[ -r $f ]]; then while read -r k v; do [[ $k == oom_kill ]] && o=$v; done < "$f"; fi
  done
  for f in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do
    if [[ -r $f ]]; then while read -r k v; do [[ $k == max ]] && p=$v; done < "$f"; fi
  done
}
counters; o0=$o; p0=$p
exec 3>&2 2>/dev/null 4>"$d/$t.out" 5>"$d/$t.err" || exit 125
set -m
s=
if cd -- "$w" 2>/dev/null; then
  (ARES_EXEC=$t; export ARES_EXEC; exec "$@" < /dev/null >&4 2>&5 3>&- 4>&- 5>&-) & c=$!
  if [[ -n $l ]]; then
    (read -t "$l" <> <(:); kill -KILL -- "-$c") < /dev/null > /dev/null 3>&- 4>&- 5>&- & s=$!
  fi
  wait "$c"; rc=$?
  [[ -n $s ]] && kill -KILL -- "-$s"
else
  echo "ares sandbox: cannot use working directory '$w': no such directory" >&5; rc=126
fi
counters
LC_ALL=C
copy() { local x; while IFS= read -r -d "" x; do printf '%s\0' "$x"; done; printf '%s' "$x"; }
copy < /proc/self/fd/4; copy < /proc/self/fd/5 >&3
printf '\nARES-EXIT-%s %s %s %s\n' "$t" "$rc" "$((o - o0))" "$((p - p0))"
exit "$rc"
"""


def wrapper_argv(token: str, cwd: str, timeout_s: float | None, cmd: str) -> list[str]:
    limit = "" if timeout_s is None else f"{timeout_s:.3f}"
    return ["/bin/sh", "-c", WRAPPER, "ares-exec", token, cwd, limit, cmd]


def sweep_argv(token: str) -> list[str]:
    return ["/bin/sh", "-c", SWEEP, "ares-sweep", token]


def trusted_wrapper_argv(
    shell: Sequence[str], token: str, scratch: str, cwd: str, timeout_s: float | None, argv: Sequence[str]
) -> list[str]:
    """TRUSTED_WRAPPER run by ``shell`` (a trusted bash's command line) around the exact ``argv``.
    ``-p``: no $BASH_ENV file, functions or SHELLOPTS from the environment (the command gets them)."""
    limit = "" if timeout_s is None else f"{timeout_s:.3f}"
    return [*shell, "-p", "-c", TRUSTED_WRAPPER, "ares-exec", token, scratch, cwd, limit, *argv]


def trusted_sweep_argv(shell: Sequence[str], token: str) -> list[str]:
    """The sweeper's bash branch, run by ``shell`` (a trusted bash's command line)."""
    return [*shell, "-p", "-c", SWEEP_BASH, "ares-sweep", token]


def stdin_archive(token: str, data: bytes) -> tuple[str, bytes]:
    """A tar to extract into the returned directory that puts ``data`` where the wrapper reads stdin."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folder = tarfile.TarInfo(f".ares-exec-{token}")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o777  # the image's USER may not be root
        tar.addfile(folder)
        info = tarfile.TarInfo(f"{folder.name}/in")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return "/tmp", buf.getvalue()


@dataclass(frozen=True, slots=True)
class Trailer:
    """What the wrapper reported after the command ended."""

    exit_code: int
    oom_kills: int
    fork_refusals: int


def split_trailer(stdout: bytes, token: str) -> tuple[bytes, Trailer | None]:
    """Separate the command's stdout from the wrapper's trailer (None if the wrapper never got there)."""
    marker = f"\nARES-EXIT-{token} ".encode()
    at = stdout.rfind(marker)
    if at < 0:
        return stdout, None
    fields = stdout[at + len(marker) :].split()
    try:
        exit_code, oom, forks = (int(x) for x in fields[:3])
    except ValueError:
        return stdout, None
    return stdout[:at], Trailer(exit_code, oom, forks)


class ExecStream:
    """Reads an exec's multiplexed stdout/stderr frames from its hijacked socket, with deadlines.

    ``read_until`` runs on a worker thread and may be called again after it returned False (deadline
    passed); ``abort`` may be called from any thread to make a blocked read return.
    """

    HEADER = struct.Struct(">BxxxL")

    def __init__(self, sock: object) -> None:
        self._owner = sock  # the SDK's wrapper; keeps the HTTP response (and TLS) alive
        raw = getattr(sock, "_sock", sock)
        if not isinstance(raw, socket.socket):
            raise TypeError(f"unsupported exec socket {type(sock).__name__}")
        self._sock = raw
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._closed = False
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.finished = False

    def read_until(self, deadline: float | None) -> bool:
        """Read until the stream ends (True) or the monotonic ``deadline`` passes (False)."""
        while not self.finished:
            if deadline is None:
                self._sock.settimeout(None)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self.finished = True
                self.close()
            self._buf += chunk
            self._split_frames()
        return True

    def _split_frames(self) -> None:
        size = self.HEADER.size
        while len(self._buf) >= size:
            kind, length = self.HEADER.unpack_from(self._buf)
            if len(self._buf) < size + length:
                return
            payload = self._buf[size : size + length]
            (self.stderr if kind == 2 else self.stdout).extend(payload)
            del self._buf[: size + length]

    def abort(self) -> None:
        """Make a blocked ``read_until`` return: the command's output is no longer wanted."""
        with self._lock:
            if not self._closed:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for closer in (self._sock, self._owner):
                with contextlib.suppress(OSError):
                    closer.close()  # type: ignore[attr-defined]


def open_exec(
    api: docker.APIClient, container: str, argv: list[str], env: Mapping[str, str] | None
) -> tuple[ExecStream, str]:
    """Start ``argv`` in ``container`` (the exec's stream and id). Blocking."""
    # The wrapper changes to the command's directory itself; starting in / keeps commands working
    # when the agent removed the container's working dir.
    created = api.exec_create(
        container, argv, stdout=True, stderr=True, environment=dict(env or {}), workdir="/"
    )
    return ExecStream(api.exec_start(created["Id"], socket=True)), created["Id"]


async def sweep(
    api: docker.APIClient, container: str, token: str, trusted: Sequence[str] | None, timeout_s: float
) -> None:
    """Kill every process still carrying a command's ``token``; ``trusted`` is a trusted shell's argv
    (the sweep then runs on it: nothing of the container runs). Best effort: failures are logged."""
    try:
        argv = sweep_argv(token) if trusted is None else trusted_sweep_argv(trusted, token)
        stream, _ = await run_blocking(open_exec, api, container, argv, None)
        try:
            await run_blocking(stream.read_until, time.monotonic() + timeout_s)
        finally:
            stream.abort()
            stream.close()
    except API_ERRORS as exc:
        log.warning("could not sweep the processes of a timed out command: %s", api_message(exc))
