"""The verifier on the local sandbox: trusted channels, outputs vs full mode, what is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from ares.errors import VerifierError, VerifierTimeoutError
from ares.sandbox.local import LocalSandbox
from ares.tasks.model import Task
from ares.tasks.verifier import verify

# Reports what the tests see, then rewards 1 iff solution.txt says "right".
PROBE_SH = """\
set -u
out=/logs/verifier
{ echo "python3: $(head -c 40 /usr/bin/python3 | tr -d '\\0' | head -1)"
  touch /tests/x 2>/dev/null && echo "tests: writable" || echo "tests: read-only"
  ls /tests | tr '\\n' ' '; echo
  echo "etc-extra: $(cat /etc/extra.conf 2>/dev/null || echo absent)"
} > "$out/test-output.txt"
[ "$(cat solution.txt 2>/dev/null)" = right ] && echo 1 > "$out/reward.txt" || echo 0 > "$out/reward.txt"
echo done
"""

TASK = Task(
    id="probe", instruction="write right into solution.txt", tests={"test.sh": PROBE_SH, "data/x.json": "{}"}
)


@pytest.fixture
async def agent() -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(TASK.sandbox_spec())
    await sb.start()
    yield sb
    await sb.stop()


async def test_outputs_mode_sees_the_workdir_but_not_a_replaced_interpreter(agent: LocalSandbox) -> None:
    await agent.exec(
        "echo right > solution.txt"
        " && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/bin/python3"
        " && echo planted > /etc/extra.conf && rm -f /etc/hostname"
    )
    verdict = await verify(TASK, agent)
    assert verdict.reward == 1.0 and verdict.mode == "outputs"
    report = verdict.files.files["test-output.txt"]
    assert "ELF" in report.splitlines()[0]  # the image's interpreter, not the agent's script
    assert "tests: read-only" in report and "data test.sh" in report
    assert "etc-extra: absent" in report
    assert verdict.output is not None and verdict.output.stdout == "done\n"
    assert verdict.outside is not None
    first, *rest = verdict.outside.paths  # python3 may be a link to python3.X, which was written
    assert first.startswith("/usr/bin/python3") and rest == ["/etc/extra.conf", "/etc/hostname (deleted)"]


async def test_full_mode_sees_the_agents_whole_filesystem(agent: LocalSandbox) -> None:
    await agent.exec("echo wrong > solution.txt && echo planted > /etc/extra.conf")
    verdict = await verify(replace(TASK, verifier_mode="full"), agent)
    assert verdict.reward == 0.0 and verdict.mode == "full"
    assert "etc-extra: planted" in verdict.files.files["test-output.txt"]
    assert verdict.outside is not None and verdict.outside.paths == ("/etc/extra.conf",)


async def test_declared_outputs_are_carried_and_nothing_else(agent: LocalSandbox) -> None:
    await agent.exec("echo right > solution.txt && echo planted > /etc/extra.conf")
    verdict = await verify(replace(TASK, outputs=("/etc/extra.conf",)), agent)
    assert verdict.reward == 0.0  # the workdir is not an output any more
    assert "etc-extra: planted" in verdict.files.files["test-output.txt"]


async def test_files_planted_where_the_verifier_reads_do_not_count(agent: LocalSandbox) -> None:
    await agent.exec(
        "mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt"
        " && echo '{\"reward\": 1}' > /logs/verifier/reward.json"
        " && echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh"
    )
    for mode in ("outputs", "full"):
        verdict = await verify(replace(TASK, verifier_mode=mode), agent)  # type: ignore[arg-type]
        assert verdict.reward == 0.0, mode
        assert set(verdict.files.files) == {"reward.txt", "test-output.txt"}


async def test_a_reward_link_to_a_host_file_is_an_error_with_evidence(agent: LocalSandbox) -> None:
    task = replace(TASK, tests={"test.sh": "ln -s /proc/1/environ /logs/verifier/reward.txt; echo ran"})
    with pytest.raises(VerifierError) as caught:
        await verify(task, agent)
    evidence = caught.value.evidence
    assert evidence.output.stdout == "ran\n" and evidence.mode == "outputs"


async def test_no_reward_keeps_the_tests_files_as_evidence(agent: LocalSandbox) -> None:
    task = replace(
        TASK, tests={"test.sh": "echo 'E   assert 1 == 2' > /logs/verifier/test-output.txt; exit 3"}
    )
    with pytest.raises(VerifierError, match="exit code 3") as caught:
        await verify(task, agent)
    assert caught.value.evidence.files.files == {"test-output.txt": "E   assert 1 == 2\n"}


async def test_background_process_of_the_tests_cannot_write_after_they_end(agent: LocalSandbox) -> None:
    """The host reads the reward only after every process of the tests has been killed."""
    script = "(sleep 0.3; echo '{\"reward\": 1}' > /logs/verifier/reward.json) & "
    script += "echo 0 > /logs/verifier/reward.txt"
    verdict = await verify(replace(TASK, tests={"test.sh": script}), agent)
    assert verdict.reward == 0.0 and "reward.json" not in verdict.files.files


async def test_tests_that_run_past_their_timeout_raise_the_verifier_timeout(agent: LocalSandbox) -> None:
    slow = replace(
        TASK, tests={"test.sh": "sleep 30\necho 1 > /logs/verifier/reward.txt\n"}, verifier_timeout_s=1
    )
    with pytest.raises(VerifierTimeoutError, match=r"timed out after 1s") as raised:
        await verify(slow, agent)
    assert isinstance(raised.value, TimeoutError) and raised.value.evidence.output.timed_out
