"""The local sandbox's states (state.py): transitions, the crash flag, and the errors of wrong states."""

from __future__ import annotations

import pytest

from ares.errors import SandboxError
from ares.sandbox.local.state import NOT_STARTED, STOPPED_MESSAGE, Phase, SandboxState


def started() -> SandboxState:
    state = SandboxState()
    state.starting()
    state.launched()
    return state


def test_a_new_state_is_stopped_and_says_to_start() -> None:
    state = SandboxState()
    assert (state.phase, state.running, state.crashed) == (Phase.STOPPED, False, None)
    with pytest.raises(SandboxError, match="call start"), state.running_command():
        pass


def test_commands_make_it_busy_until_they_end() -> None:
    state = started()
    with state.running_command(), state.running_command():
        assert (state.phase, state.busy) == (Phase.BUSY, 2)
    assert (state.phase, state.busy) == (Phase.STARTED, 0)


def test_a_crash_is_a_flag_that_outlives_the_kill() -> None:
    state = started()
    state.crash("the init died")
    state.crash("a later reason")
    state.halting()
    state.halted()
    assert (state.phase, state.crashed, state.running) == (Phase.CRASHED, "the init died", False)
    with pytest.raises(SandboxError, match="the init died"), state.running_command():
        pass


def test_a_stopped_sandbox_did_not_crash() -> None:
    state = started()
    state.halting()
    state.halted()
    state.crash("a command lost its shepherd")
    assert (state.phase, state.crashed, state.why_not_running()) == (Phase.STOPPED, None, STOPPED_MESSAGE)


def test_a_crash_seen_while_halting_is_reported() -> None:
    state = started()
    state.halting()
    state.crash("the sandbox died while running a command")
    state.halted()
    assert state.crashed == "the sandbox died while running a command"


def test_a_start_forgets_how_the_last_run_ended() -> None:
    state = started()
    state.crash("boom")
    state.starting()
    assert (state.phase, state.crashed, state.why_not_running()) == (Phase.STOPPED, None, NOT_STARTED)
    state.launched()
    assert state.phase is Phase.STARTED


def test_a_snapshot_waits_for_commands_and_blocks_new_ones() -> None:
    state = started()
    with state.running_command(), pytest.raises(SandboxError, match="1 command"), state.taking_snapshot():
        pass
    with state.taking_snapshot():
        assert state.phase is Phase.SNAPSHOTTING
        with pytest.raises(SandboxError, match="being snapshotted"), state.running_command():
            pass
        with pytest.raises(SandboxError, match="already being taken"), state.taking_snapshot():
            pass
    assert state.phase is Phase.STARTED


def test_a_stopped_sandbox_takes_no_snapshot() -> None:
    with pytest.raises(SandboxError, match="not running"), SandboxState().taking_snapshot():
        pass
