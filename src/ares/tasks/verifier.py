"""The verifier: runs a task's tests after the agent is done and turns their output into a reward.

Trust model: the agent must not be able to forge its reward. On the local sandbox (``fork_verifier``)
the agent's processes are killed and the tests run in a fresh sandbox of the *pristine* image plus
only the task's outputs from the agent's diff (``outputs`` mode; ``full`` stacks the whole diff for
tasks whose success is system state), so the shell, interpreters, site dirs and start-up hooks the
tests use are the image's. The tests reach it read-only from the host at /tests, /logs/verifier is a
host directory, and the host reads the reward there itself once every process of the tests is dead.
On Docker (``fork_outputs``) the same two modes run in a fresh container (of the pristine image plus
the outputs copied by the archive API, or a commit of the agent's container); the tests are uploaded
and the reward is read through the archive API once that container is stopped. Cloud backends
(``fork_outputs`` too) start a fresh remote sandbox of the task's image and carry the outputs over
through the host; full mode is not available there.

Outputs that break a bound of the carry (``ares.sandbox.carry_bounds``: entry counts, sizes, sparse
or special files, depth, path length, unreadable modes, time) raise ``OutputRefusedError`` in the
fork; the verdict is then reward 0 with the term ``refused_<reason>`` and ``refused.json``: the
agent caused it, so it is scored, never an errored episode.

Which of these a backend offers is *declared* (``ares.sandbox.capabilities``), never probed. A
backend that declares none of them is an error that names it: the tests run in the agent's own
sandbox (``in-place``) only when the task or the user asks for that mode explicitly.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ares.errors import OutputRefusedError, SandboxError, VerifierError, VerifierTimeoutError
from ares.sandbox.base import BindMount, DiffSummary, ExecResult, Sandbox
from ares.sandbox.capabilities import (
    ArchivingSandbox,
    ArgvSandbox,
    Capability,
    HaltableSandbox,
    OutputsForkingSandbox,
    VerifierForkingSandbox,
    declared,
    require,
    supports,
)
from ares.sandbox.files import write_files
from ares.sandbox.trusted_shell import SHELL_DIR
from ares.tasks.model import Task, Verdict
from ares.tasks.reward_archive import read_logs_archive
from ares.tasks.reward_files import (
    LOGS_DIR,
    LogFiles,
    parse_reward_json,
    parse_reward_txt,
    read_log_files,
    read_rewards,
    reward_from,
)

__all__ = ["LOGS_DIR", "TESTS_DIR", "Verdict", "parse_reward_json", "parse_reward_txt", "verify"]

TESTS_DIR = "/tests"
TEST_COMMAND = f"bash {TESTS_DIR}/test.sh"


# The capability protocols, re-exported here where the verifier first defined them.
__all__ += ["HaltableSandbox", "OutputsForkingSandbox", "VerifierForkingSandbox"]


async def verify(task: Task, sandbox: Sandbox) -> Verdict:
    """Run ``task.tests`` against what the agent left in ``sandbox`` and read the reward.

    Raises VerifierError when no usable reward was produced (never a silent 0). A task that declares
    its own ``verification`` (e.g. SWE-bench-format tasks) is checked by it instead.
    """
    if task.verification is not None:
        return await task.verification.verify(task, sandbox)
    if task.verifier_mode == "in-place":
        return await _verify_uploaded(task, sandbox, "in-place")
    capabilities = declared(sandbox)
    outputs = None if task.verifier_mode == "full" else task.output_paths
    needed = Capability.FULL_FORK if outputs is None else Capability.OUTPUTS_FORK
    # A backend with its own upload fork (docker: remote-friendly, a trusted shell in full mode) uses
    # it; the bind-mount fork serves backends without one (local).
    if Capability.VERIFIER_FORK in capabilities and needed not in capabilities:
        return await _verify_in_fork(task, require(sandbox, Capability.VERIFIER_FORK, VerifierForkingSandbox))
    if needed not in capabilities:
        raise VerifierError(_cannot_fork(task, sandbox, needed))
    forking = require(sandbox, needed, OutputsForkingSandbox)
    fork = await forking.fork_outputs(outputs, fresh=(LOGS_DIR, TESTS_DIR))
    try:
        argv = fork.shell_argv(f"{TESTS_DIR}/test.sh")
        return await _verify_uploaded(task, fork.sandbox, _mode(outputs), fork.outside, argv)
    finally:
        await fork.sandbox.stop()


def _cannot_fork(task: Task, sandbox: Sandbox, needed: Capability) -> str:
    """Why the tests cannot run here, and the explicit way to accept running them in place."""
    backend = type(sandbox).__name__
    what = "the agent's whole filesystem" if needed is Capability.FULL_FORK else "the task's outputs"
    return (
        f"task {task.id}: the {backend} backend cannot start a fresh sandbox with {what} for the tests "
        f"(it declares {sorted(c.value for c in declared(sandbox)) or 'no capabilities'}; "
        f"'{task.verifier_mode}' mode needs '{Capability.VERIFIER_FORK.value}' or '{needed.value}'). "
        "Running them in the agent's own sandbox lets the agent tamper with its reward; to accept that, "
        "ask for it: verifier_mode 'in-place' (the task's [ares.verifier] mode, --verifier-mode in-place, "
        "or make(..., verifier_mode='in-place'))."
    )


async def _verify_in_fork(task: Task, sandbox: VerifierForkingSandbox) -> Verdict:
    logs = await asyncio.to_thread(sandbox.host_dir, "verifier-logs")
    tests = task.tests
    if not isinstance(tests, Path):
        tests = await asyncio.to_thread(_materialize, sandbox.host_dir("verifier-tests"), tests)
    binds = (BindMount(Path(tests), TESTS_DIR), BindMount(logs, LOGS_DIR, read_only=False))
    shell = await sandbox.trusted_shell()
    if shell is not None:
        binds += (BindMount(shell[0], SHELL_DIR),)
    outputs = None if task.verifier_mode == "full" else task.output_paths
    try:
        fork = await sandbox.fork_verifier(outputs=outputs, binds=binds)
    except OutputRefusedError as exc:
        return refusal(exc, _mode(outputs))
    try:
        await fork.sandbox.start()
        argv = None if shell is None else shell[1].argv(SHELL_DIR, f"{TESTS_DIR}/test.sh")
        output = await _run_tests(task, fork.sandbox, argv)
    except OutputRefusedError as exc:
        return refusal(exc, _mode(outputs))
    finally:
        await fork.sandbox.stop()  # every process of the tests is dead before their files are read
    try:
        rewards, files = await asyncio.to_thread(_read_logs, logs)
    except VerifierError as exc:  # a reward file that is a link, a FIFO or too large
        exc.evidence = Verdict(
            math.nan, {}, output, "full" if outputs is None else "outputs", LogFiles(), fork.outside
        )
        raise
    return _verdict(task, rewards, files, output, "full" if outputs is None else "outputs", fork.outside)


#: The file a refused carry leaves on the verdict (its reason and detail).
REFUSED_FILE = "refused.json"


def refusal(exc: OutputRefusedError, mode: str, terms: Mapping[str, float] | None = None) -> Verdict:
    """The verdict on outputs the carry refused: reward 0, the term ``refused_<reason>`` (plus
    ``terms``), the reason in ``refused.json``. The agent broke a bound, so it is scored, not errored."""
    record = json.dumps({"reason": exc.reason, "detail": exc.detail}, indent=1)
    return Verdict(
        0.0, {**(terms or {}), exc.term: 1.0}, None, mode, LogFiles({REFUSED_FILE: record}), exc.outside
    )


def _materialize(dest: Path, files: Mapping[str, bytes | str]) -> Path:
    write_files(dest, files)
    return dest


def _read_logs(logs: Path) -> tuple[dict[str, str], LogFiles]:
    return read_rewards(logs), read_log_files(logs)


async def _run_tests(task: Task, sandbox: Sandbox, argv: Sequence[str] | None = None) -> ExecResult:
    """``bash /tests/test.sh``; with ``argv`` (a trusted shell's command line) exactly that. SHELL
    is set so that bash never looks its user up through NSS modules from the sandbox."""
    env = {"SHELL": "/bin/bash", **task.env, **task.verifier_env}
    timeout = task.verifier_timeout_s
    if argv is None:
        return await sandbox.exec(TEST_COMMAND, cwd=task.workdir, env=env, timeout_s=timeout)
    exact: ArgvSandbox = sandbox  # type: ignore[assignment]  # only forks get here
    return await exact.exec(TEST_COMMAND, argv=argv, cwd=task.workdir, env=env, timeout_s=timeout)


def _mode(outputs: Sequence[str] | None) -> str:
    return "full" if outputs is None else "outputs"


async def _verify_uploaded(
    task: Task,
    sandbox: Sandbox,
    mode: str,
    outside: DiffSummary | None = None,
    argv: Sequence[str] | None = None,
) -> Verdict:
    """Backends without host binds: tests uploaded, reward read through the backend's file API
    (after a ``halt`` where the backend has one, so no process of the tests outlives them).

    With ``argv`` (a trusted shell's command line for test.sh: docker's full-mode fork) the sandbox
    already has empty /tests and /logs/verifier, so no program of it runs before the tests."""
    if argv is None:
        reset = await sandbox.exec(
            f"rm -rf /logs {TESTS_DIR} && mkdir -p {LOGS_DIR} {TESTS_DIR}", cwd="/", timeout_s=60
        )
        if not reset.ok:
            raise VerifierError(f"could not prepare the verifier dirs: {reset.stderr.strip()[:500]}")
    await sandbox.upload(task.tests, TESTS_DIR)
    output = await _run_tests(task, sandbox, argv)
    if supports(sandbox, Capability.HALT):
        await require(sandbox, Capability.HALT, HaltableSandbox).halt()
    try:
        rewards, files = await _fetch_logs(sandbox)
    except VerifierError as exc:  # a reward file that is a link, a FIFO or too large
        exc.evidence = Verdict(math.nan, {}, output, mode, LogFiles(), outside)
        raise
    return _verdict(task, rewards, files, output, mode, outside)


#: Archives up to this size are parsed on the event loop (microseconds); larger ones in a thread.
INLINE_ARCHIVE_BYTES = 256 * 1024


async def _fetch_logs(sandbox: Sandbox) -> tuple[dict[str, str], LogFiles]:
    """/logs/verifier's rewards and files: from the backend's in-memory archive where it declares
    one (no host dir), else downloaded to a host temp dir and read there. Missing: nothing."""
    if supports(sandbox, Capability.ARCHIVE):
        try:
            data = await require(sandbox, Capability.ARCHIVE, ArchivingSandbox).archive(LOGS_DIR)
        except SandboxError:
            return {}, LogFiles()
        if len(data) <= INLINE_ARCHIVE_BYTES:
            return read_logs_archive(data)
        return await asyncio.to_thread(read_logs_archive, data)
    with tempfile.TemporaryDirectory(prefix="ares-verifier-") as tmp:
        local = Path(tmp) / "verifier"
        try:
            await sandbox.download(LOGS_DIR, local)
        except SandboxError:
            local.mkdir()
        return await asyncio.to_thread(_read_logs, local)


def _verdict(
    task: Task,
    rewards: dict[str, str],
    files: LogFiles,
    output: ExecResult,
    mode: str,
    outside: DiffSummary | None,
) -> Verdict:
    try:
        found = reward_from(rewards)
    except VerifierError as exc:
        exc.evidence = Verdict(math.nan, {}, output, mode, files, outside)
        raise
    if found is None:
        why = (
            f"timed out after {task.verifier_timeout_s:g}s"
            if output.timed_out
            else f"exit code {output.exit_code}"
        )
        tail = (output.stdout + output.stderr).strip()[-800:]
        kind = VerifierTimeoutError if output.timed_out else VerifierError
        error = kind(f"tests/test.sh ({why}) wrote neither reward.json nor reward.txt. Output tail:\n{tail}")
        error.evidence = Verdict(math.nan, {}, output, mode, files, outside)
        raise error
    reward, terms = found
    return Verdict(reward, terms, output, mode, files, outside)
