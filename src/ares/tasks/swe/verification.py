"""The SWE verifier: the agent's /testbed diff in a fresh sandbox of the pristine image, graded on the host.

1. The agent's sandbox is forked for the verifier (``fork_verifier``, outputs mode): the pristine
   image plus only the agent's filesystem diff of /testbed, minus the files ``changes.dropped``
   names (``.git``, git attributes, pytest hooks and config, start-up hooks, byte code, and the
   instance's whole test trees, ``test_roots``), whose image versions show through instead. The
   agent's git, its processes and everything it changed outside /testbed never reach the grader.
   Outputs that break a carry bound (``ares.sandbox.carry_bounds``) are refused: reward 0 with the
   term ``refused_<reason>``, never an errored episode.
2. In that fork, through the trusted shell (the image's bash, not one the agent could replace), the
   image's git writes the agent's change as a diff against ``base_commit`` (kept on the episode for
   export), then the eval script resets the test files, applies the hidden ``test_patch`` (which only
   ever exists on the host and in this fork) and runs the tests between the harness's markers.
3. The host parses and grades the log with the harness's rules (``grading.grade_log``). When the
   tests run under pytest, the integrity plugin (``ares.tasks.integrity``) was armed in the fork: its
   own account of the run must agree with the log and show no tampering, else reward 0 and the term
   ``tampered`` (``swe/integrity.json``).

Reward 1 iff resolved. A log that cannot be graded is an errored episode (a fault of the task, not
a 0) when the grader saw the pristine repository (the agent's kept change is empty) or the harness
names an infrastructure cause (out of memory, ...). Otherwise the agent's change is what broke the
run, since ARES itself resets everything else the tests depend on: its code killed or hung the test
process, it printed results the test command's exit status contradicts, or it turned the test
directories into symlinks so the hidden tests could not be reset or applied. That is a reward of 0
with the reason on record, so that breaking the test run is never a way to escape a 0. (A task whose
hidden tests do not apply at all is found by its oracle and null runs: errored for null, 0 for the
oracle.)
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ares.errors import OutputRefusedError, VerifierError
from ares.sandbox.base import BindMount, DiffSummary, ExecResult, Sandbox
from ares.sandbox.capabilities import ArgvSandbox, Capability, VerifierForkingSandbox, declared, require
from ares.sandbox.files import write_files
from ares.sandbox.trusted_shell import SHELL_DIR, ShellBundle
from ares.tasks.integrity.arming import Arming, arm
from ares.tasks.integrity.check import MAX_REPORT_BYTES, judge
from ares.tasks.model import Task
from ares.tasks.reward_files import LogFiles
from ares.tasks.swe import changes, r2e, tamper
from ares.tasks.swe.grading import SweGrade, SweGradingError, grade_log, parse_log
from ares.tasks.verifier import TESTS_DIR, Verdict, refusal

#: Bounds of what the episode keeps: the agent's diff and the eval log (head and tail).
MAX_DIFF_CHARS = 1_000_000
MAX_LOG_CHARS = 200_000
DIFF_SCRIPT = "diff.sh"
EVAL_SCRIPT = "eval.sh"


@dataclass(frozen=True)
class SweVerification:
    """How one SWE instance is graded (a ``Task.verification``); holds the hidden tests on the host."""

    instance_id: str
    base_commit: str
    eval_script: str = field(repr=False)
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    log_parser: str = "pytest"
    version: str = ""
    kind: str = "swebench"
    #: R2E-Gym: every test's expected status (graded by ``r2e.grade_expected`` instead of F2P/P2P).
    expected_output: Mapping[str, str] | None = None
    #: Hidden test files (path under /tests -> text) the eval script copies into /testbed.
    hidden_files: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: The instance's test trees (``changes.test_roots``): the grader sees the image's version.
    test_roots: tuple[str, ...] = ()
    #: Arm the integrity plugin (``ares.tasks.integrity``) when the tests run under pytest.
    integrity: bool = True

    async def verify(self, task: Task, sandbox: Sandbox) -> Verdict:
        if task.verifier_mode == "in-place":
            raise VerifierError(
                f"task {task.id}: SWE tasks are graded only in a fresh sandbox of the pristine image; "
                "verifier_mode 'in-place' would run the hidden tests where the agent can tamper with them"
            )
        if Capability.VERIFIER_FORK not in declared(sandbox):
            raise VerifierError(
                f"task {task.id}: the {type(sandbox).__name__} backend cannot fork a verifier sandbox "
                f"with host binds ('{Capability.VERIFIER_FORK.value}'); SWE grading needs it (use the "
                "local or docker sandbox)"
            )
        forking = require(sandbox, Capability.VERIFIER_FORK, VerifierForkingSandbox)
        arming = None
        if self.integrity_armable:
            dirs = forking.host_dir("swe-integrity"), forking.host_dir("swe-integrity-out")
            arming = await asyncio.to_thread(arm, *dirs, self.test_roots)
        scripts = await asyncio.to_thread(self._write_scripts, forking.host_dir("swe-verifier"), arming)
        binds = [BindMount(scripts, TESTS_DIR), *(arming.binds() if arming else ())]
        shell = await forking.trusted_shell()
        if shell is not None:
            binds.append(BindMount(shell[0], SHELL_DIR))
        drop = partial(changes.dropped, workdir=task.workdir, test_roots=self.test_roots)
        try:
            fork = await forking.fork_verifier(outputs=(task.workdir,), binds=binds, drop=drop)
            try:
                await fork.sandbox.start()
                patch = await _run(task, fork.sandbox, shell, DIFF_SCRIPT, 120.0)
                output = await _run(task, fork.sandbox, shell, EVAL_SCRIPT, task.verifier_timeout_s)
            finally:
                await fork.sandbox.stop()
        except OutputRefusedError as exc:  # the agent's files break a carry bound: a 0, not an error
            return refusal(exc, "outputs", {"resolved": 0.0})
        model_patch = patch.stdout if patch.ok else ""
        report = await asyncio.to_thread(read_report, arming) if arming else None
        return self._verdict(output, model_patch, patch, fork.outside, (arming, report))

    @property
    def integrity_armable(self) -> bool:
        """Whether the tests run under pytest, so the integrity plugin can watch them (``integrity``)."""
        return self.integrity and (self.expected_output is not None or "pytest" in self.log_parser)

    def _write_scripts(self, dest: Path, arming: Arming | None = None) -> Path:
        prelude = "".join(f"{line}\n" for line in arming.shell_lines()) if arming else ""
        scripts = {
            DIFF_SCRIPT: self.diff_script(arming),
            EVAL_SCRIPT: "exec 2>&1\n" + prelude + self.eval_script,
        }
        write_files(dest, {**self.hidden_files, **scripts})
        return dest

    def diff_script(self, arming: Arming | None = None) -> str:
        """The agent's change as ``git diff`` writes it (binary-safe), on a throwaway index; the
        image's git and repository (the agent's .git never reaches the fork), no hooks or drivers."""
        excludes = " ".join(shlex.quote(spec) for spec in changes.diff_excludes(self.test_roots))
        git = "git -c core.hooksPath=/dev/null -c core.attributesFile=/dev/null -c core.fsmonitor=false"
        base = shlex.quote(self.base_commit)
        return "\n".join(
            [
                "set -eu",
                "cd /testbed",
                'export GIT_INDEX_FILE="$(mktemp -d)/index"',
                f"{git} read-tree {base}",
                f"{git} add -A -- . {excludes} >/dev/null",
                *([arming.changed_files_line(git, base, excludes)] if arming else []),
                f"{git} diff --cached --binary --no-color --no-ext-diff --no-textconv {base} -- . {excludes}",
                "",
            ]
        )

    def _verdict(
        self,
        output: ExecResult,
        model_patch: str,
        patch_run: ExecResult,
        outside: DiffSummary,
        integrity: tuple[Arming | None, bytes | None] = (None, None),
    ) -> Verdict:
        log = output.stdout + output.stderr
        files = {
            "swe/model.patch": _bounded(model_patch, MAX_DIFF_CHARS),
            "swe/eval.log": _bounded(log, MAX_LOG_CHARS),
        }
        if not patch_run.ok:
            files["swe/diff-error.txt"] = _bounded(patch_run.stdout + patch_run.stderr, 4000)
        base = Verdict(float("nan"), {}, output, "outputs", LogFiles(files), outside)
        try:
            grade = self._grade(log)
        except SweGradingError as exc:
            return self._ungradable(exc, output, model_patch, base, files)
        rejected = tamper.rejection(log, grade, self._parse)
        if rejected is not None:
            term, why = rejected
            files["swe/grade.json"] = json.dumps({**grade.to_dict(), "rejected": why}, indent=1)
            return _replace(base, 0.0, {**_terms(grade), "resolved": 0.0, term: 1.0}, files)
        arming, report = integrity
        if arming is not None:
            result = judge(log, report, arming.nonce, self._parse(log) or {}, self._graded())
            files["swe/integrity.json"] = json.dumps(result.to_dict(), indent=1)
            if result.tampered:
                files["swe/grade.json"] = json.dumps({**grade.to_dict(), "rejected": "tampered"}, indent=1)
                return _replace(base, 0.0, {**_terms(grade), "resolved": 0.0, "tampered": 1.0}, files)
        files["swe/grade.json"] = json.dumps(grade.to_dict(), indent=1)
        return _replace(base, grade.reward, _terms(grade), files)

    def _grade(self, log: str) -> SweGrade:
        if self.expected_output is not None:
            return r2e.grade_expected(log, self.expected_output)
        return grade_log(
            log,
            self.fail_to_pass,
            self.pass_to_pass,
            self.log_parser,
            instance_id=self.instance_id,
            version=self.version,
        )

    def _graded(self) -> tuple[str, ...]:
        if self.expected_output is not None:
            return tuple(self.expected_output)
        return (*self.fail_to_pass, *self.pass_to_pass)

    def _parse(self, text: str) -> Mapping[str, object] | None:
        """Statuses in a piece of log, by this instance's parser; None when it is not pytest's."""
        if self.expected_output is not None:
            return r2e.parse_log("short test summary info\n" + text)
        if "pytest" not in self.log_parser:
            return None
        return parse_log(text, self.log_parser)

    def _ungradable(
        self, exc: SweGradingError, output: ExecResult, model_patch: str, base: Verdict, files: dict[str, str]
    ) -> Verdict:
        files["swe/grade.json"] = json.dumps(
            {"resolved": False, "error": exc.reason, "detail": exc.detail, "infra_reason": exc.infra_reason}
        )
        agent_caused = (bool(model_patch.strip()) and exc.infra_reason is None) or output.timed_out
        if agent_caused:
            return _replace(base, 0.0, {"resolved": 0.0, f"ungradable_{exc.reason}": 1.0}, files)
        error = VerifierError(f"SWE grading of {self.instance_id} failed: {exc.reason} ({exc.detail})")
        error.evidence = _replace(base, float("nan"), {}, files)
        raise error


def _terms(grade: SweGrade) -> dict[str, float]:
    return {
        "resolved": grade.reward,
        "f2p_passed": float(len(grade.f2p_passed)),
        "f2p_failed": float(len(grade.f2p_failed)),
        "p2p_passed": float(len(grade.p2p_passed)),
        "p2p_failed": float(len(grade.p2p_failed)),
    }


def _replace(base: Verdict, reward: float, terms: Mapping[str, float], files: dict[str, str]) -> Verdict:
    return Verdict(reward, dict(terms), base.output, base.mode, LogFiles(dict(files)), base.outside)


def read_report(arming: Arming) -> bytes | None:
    """The plugin's report, None if the test process never wrote it; bounded (past the bound the
    check finds it oversized, so the agent cannot make the host read gigabytes)."""
    try:  # the sandbox could have left a symlink or a FIFO there: never follow, never block
        fd = os.open(arming.report_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(MAX_REPORT_BYTES + 1)


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


async def _run(
    task: Task, sandbox: ArgvSandbox, shell: tuple[Path, ShellBundle] | None, script: str, seconds: float
) -> ExecResult:
    """``bash /tests/<script>`` from /testbed, through the trusted shell when the image has bash."""
    env = {"SHELL": "/bin/bash", **task.env, **task.verifier_env}
    command = f"bash {TESTS_DIR}/{script}"
    if shell is None:
        return await sandbox.exec(command, cwd=task.workdir, env=env, timeout_s=seconds)
    argv = shell[1].argv(SHELL_DIR, f"{TESTS_DIR}/{script}")
    return await sandbox.exec(command, argv=argv, cwd=task.workdir, env=env, timeout_s=seconds)
