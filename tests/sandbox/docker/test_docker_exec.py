"""Commands in a docker sandbox: output, exit codes, stdin, cwd/env, timeouts, isolation."""

from __future__ import annotations

import asyncio
import hashlib
import secrets

import pytest
from docker_engine_kit import Engine

from ares.errors import SandboxCrashedError, SandboxError
from ares.sandbox import SandboxSpec
from ares.sandbox.base import SeccompPolicy
from ares.sandbox.docker import DockerConfig, DockerSandbox, DockerSandboxFactory


def count(needle: str) -> str:
    """A command printing how many processes have ``needle`` in their command line (itself excluded)."""
    pattern = f"[{needle[0]}]{needle[1:]}"
    listing = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done"
    return f"{listing} | grep -c -- '{pattern}'"


def unique_sleep() -> str:
    return f"{5000 + secrets.randbelow(4000)}.{secrets.randbelow(1000):03d}"


async def test_output_streams_exit_code_and_duration(shared_sandbox: DockerSandbox) -> None:
    result = await shared_sandbox.exec("echo out; echo err >&2; printf 'no newline'; exit 3")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\nno newline", "err\n", 3)
    assert not result.timed_out and result.limit_hit is None and result.duration_s > 0
    binary = await shared_sandbox.exec("printf '\\377\\000x'")
    assert binary.ok and binary.stdout == "\ufffd\x00x"


async def test_stdin_cwd_and_env(shared_sandbox: DockerSandbox) -> None:
    assert (await shared_sandbox.exec("pwd")).stdout == "/workspace\n"
    assert (await shared_sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
    missing = await shared_sandbox.exec("true", cwd="/does/not/exist")
    assert missing.exit_code != 0 and "/does/not/exist" in missing.stderr
    env = await shared_sandbox.exec('echo "$SPEC_VAR $CALL_VAR"', env={"CALL_VAR": "from-call"})
    assert env.stdout == "from-spec from-call\n"
    assert (await shared_sandbox.exec('echo "[$CALL_VAR]"')).stdout == "[]\n"
    assert (await shared_sandbox.exec("tr a-z A-Z", stdin=b"shout")).stdout == "SHOUT"
    big = secrets.token_bytes(3 << 20)
    digest = await shared_sandbox.exec("sha256sum", stdin=big)
    assert digest.stdout.split()[0] == hashlib.sha256(big).hexdigest()
    assert (await shared_sandbox.exec("cat")).stdout == ""  # no stdin is EOF, never a hang
    # Per-command files are gone afterwards: only the running command's own dir is there.
    assert (await shared_sandbox.exec("ls -A /tmp | grep -c ares-exec")).stdout.strip() == "1"


async def test_timeout_kills_the_command_its_children_and_setsid_escapees(
    shared_sandbox: DockerSandbox,
) -> None:
    t = unique_sleep()
    cmd = f"sleep {t} & (sleep {t} &); setsid sleep {t} & sh -c 'sleep {t}'; echo never"
    result = await shared_sandbox.exec(cmd, timeout_s=1)
    assert result.timed_out and result.exit_code == 137 and not result.ok
    assert "never" not in result.stdout
    left = await shared_sandbox.exec(count(f"sleep {t}"))
    assert left.stdout.strip() == "0"
    assert (await shared_sandbox.exec("echo still here")).stdout == "still here\n"


async def test_background_processes_survive_and_never_block_the_call(shared_sandbox: DockerSandbox) -> None:
    t = unique_sleep()
    started = await shared_sandbox.exec(f"sleep {t} & echo now")
    assert started.stdout == "now\n" and started.ok
    assert (await shared_sandbox.exec(count(f"sleep {t}"))).stdout.strip() == "1"
    # The background process holds the command's stdout: the call still returns at once.
    late = await asyncio.wait_for(shared_sandbox.exec("(sleep 5; echo late) & echo early", timeout_s=30), 4)
    assert late.stdout == "early\n"


async def test_concurrent_execs_do_not_mix(shared_sandbox: DockerSandbox) -> None:
    results = await asyncio.gather(
        *(shared_sandbox.exec(f"sleep 0.2; echo {i}; echo e{i} >&2; exit {i}") for i in range(6))
    )
    expected = [(f"{i}\n", f"e{i}\n", i) for i in range(6)]
    assert [(r.stdout, r.stderr, r.exit_code) for r in results] == expected


async def test_orphans_are_reaped(shared_sandbox: DockerSandbox) -> None:
    await shared_sandbox.exec("for i in 1 2 3; do (sleep 0.1 &); done; sleep 0.5")
    zombies = await shared_sandbox.exec("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l")
    assert zombies.stdout.strip() == "0"


async def test_bad_timeout_is_a_clear_error(shared_sandbox: DockerSandbox) -> None:
    with pytest.raises(SandboxError, match="timeout_s must be a positive"):
        await shared_sandbox.exec("true", timeout_s=0)


async def test_host_environment_is_invisible(
    factory: DockerSandboxFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = secrets.token_hex(12)
    monkeypatch.setenv("ARES_DOCKER_TEST_SECRET", secret)
    async with factory(SandboxSpec(env={"VISIBLE": "yes"}, hostname="box")) as sb:
        env = await sb.exec("env; cat /proc/1/environ | tr '\\0' '\\n'; hostname")
        assert secret not in env.stdout and "ARES_DOCKER_TEST_SECRET" not in env.stdout
        assert "VISIBLE=yes" in env.stdout.splitlines() and env.stdout.endswith("box\n")


async def test_network_is_off_unless_the_spec_asks(factory: DockerSandboxFactory) -> None:
    interfaces = "ls /sys/class/net"
    async with factory(SandboxSpec()) as off:
        assert (await off.exec(interfaces)).stdout.split() == ["lo"]
        assert (await off.exec("cat /proc/net/route")).stdout.strip().count("\n") == 0
    async with factory(SandboxSpec(network=True)) as on:
        assert set((await on.exec(interfaces)).stdout.split()) - {"lo"}


async def test_a_generated_profile_lets_commands_set_only_their_own_limits(
    factory: DockerSandboxFactory,
) -> None:
    """A task that relaxes the filter gets ARES's generated profile, whose ``prlimit64`` rule is the
    local backend's: reading any process's limits and setting one's own work, lowering pid 1's
    (root in the container could have the kernel kill it) fails with EPERM."""
    spec = SandboxSpec(seccomp=SeccompPolicy(allow=("perf_event_open",)))
    async with factory(spec) as sandbox:
        own = await sandbox.exec(
            "ulimit -c 0 && ulimit -n 256 && ulimit -c && prlimit --pid 1 --core --noheadings"
        )
        assert own.exit_code == 0 and own.stdout.split()[0] == "0", own.stderr
        lowered = await sandbox.exec("prlimit --pid 1 --core=0:0")
        assert lowered.exit_code != 0 and "Operation not permitted" in lowered.stderr


async def test_exec_before_start_and_after_stop_raise(factory: DockerSandboxFactory) -> None:
    sb = factory(SandboxSpec())
    with pytest.raises(SandboxError, match="not running"):
        await sb.exec("true")
    await sb.start()
    await sb.stop()
    await sb.stop()
    with pytest.raises(SandboxError, match="stopped"):
        await sb.exec("true")


async def test_without_a_timeout_binary_the_host_kills_the_command(factory: DockerSandboxFactory) -> None:
    async with factory(SandboxSpec()) as sb:
        assert (await sb.exec('rm "$(command -v timeout)"')).ok
        t = unique_sleep()
        result = await sb.exec(f"sleep {t} & sleep {t}", timeout_s=0.5)
        assert result.timed_out and result.exit_code == 137
        assert (await sb.exec(count(f"sleep {t}"))).stdout.strip() == "0"


async def test_a_command_that_cannot_be_killed_crashes_the_sandbox(docker_engine: Engine) -> None:
    factory = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url, exec_grace_s=0.5))
    sb = factory(SandboxSpec())
    await sb.start()
    try:
        assert (await sb.exec('rm "$(command -v timeout)"')).ok
        # env -i drops the token the sweeper looks for: nothing inside can find and kill it.
        with pytest.raises(SandboxCrashedError, match="could not be killed"):
            await sb.exec("env -i sleep 1000", timeout_s=0.5)
        assert sb.container_id is None
        with pytest.raises(SandboxError, match="could not be killed"):
            await sb.exec("true")
    finally:
        await sb.stop()
        factory.close()
