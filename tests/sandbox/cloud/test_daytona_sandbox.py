"""DaytonaSandbox against a fake Daytona served over loopback HTTP (see daytona_fake.py)."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cloud_fake_machine import LocalMachine, MemoryMachine, local_machine, local_machine_unavailable
from daytona_api_client_async import SandboxState
from daytona_fake import API_KEY, FakeDaytona

from ares.errors import SandboxCrashedError, SandboxError, SandboxTimeoutError, SandboxUnavailableError
from ares.sandbox import ImageSpec, Resources, Sandbox, SandboxSpec
from ares.sandbox.cloud.daytona import DaytonaOptions, DaytonaSandbox, DaytonaSandboxFactory


@pytest.fixture(autouse=True)
def no_daytona_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The SDK reads DAYTONA_* variables and .env files in the working directory: isolate from both."""
    for name in ("DAYTONA_API_KEY", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID", "DAYTONA_API_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDaytona]:
    async with FakeDaytona() as service:
        yield service


@pytest.fixture
def options(fake: FakeDaytona) -> DaytonaOptions:
    return DaytonaOptions(api_key=API_KEY, api_url=fake.url, labels={"team": "rl"})


@pytest.fixture
async def sandbox(options: DaytonaOptions) -> AsyncIterator[DaytonaSandbox]:
    async with DaytonaSandbox(SandboxSpec(workdir="/srv/app"), options) as started:
        yield started


@pytest.fixture
async def local_fake() -> AsyncIterator[FakeDaytona]:
    """The fake Daytona whose sandboxes are real local sandboxes."""
    if reason := local_machine_unavailable():
        pytest.skip(reason)
    async with FakeDaytona(machine_factory=local_machine) as service:
        yield service


def machine_of(fake: FakeDaytona, sandbox: DaytonaSandbox) -> MemoryMachine:
    machine = fake.machines[sandbox.sandbox_id or ""]
    assert isinstance(machine, MemoryMachine)
    return machine


# ---------------------------------------------------------------------------------------- create
async def test_create_sends_image_resources_env_network_labels_and_lifetime(
    fake: FakeDaytona, options: DaytonaOptions
) -> None:
    spec = SandboxSpec(
        image=ImageSpec(name="python:3.12-slim"),
        resources=Resources(cpus=1.5, memory_mb=3000, storage_mb=10 * 1024),
        env={"TASK": "demo"},
        workdir="/srv/app",
    )
    async with DaytonaSandbox(spec, options) as sandbox:
        (created,) = fake.created
        assert created.build_info is not None
        assert created.build_info.dockerfile_content == "FROM python:3.12-slim\n"
        assert (created.cpu, created.memory, created.disk) == (2, 3, 10)
        assert created.env == {"TASK": "demo"}
        assert created.network_block_all is True and created.network_allow_list is None
        assert created.labels is not None
        assert created.labels["created-by"] == "ares" and created.labels["team"] == "rl"
        assert created.auto_stop_interval == 15 and created.auto_delete_interval == 0  # ephemeral
        (machine_spec,) = fake.specs  # what the fake's machine was made from
        assert machine_spec.resources == Resources(cpus=2, memory_mb=3 * 1024, storage_mb=10 * 1024)
        assert machine_spec.env == {"TASK": "demo"} and machine_spec.network is False
        assert "/srv/app" in machine_of(fake, sandbox).dirs
        assert (await sandbox.exec("pwd")).stdout == "/srv/app\n"


async def test_network_is_opened_only_when_the_spec_asks(fake: FakeDaytona) -> None:
    opened = DaytonaOptions(api_key=API_KEY, api_url=fake.url, network_allow_list="10.0.0.0/8")
    async with DaytonaSandbox(SandboxSpec(network=True), opened):
        pass
    async with DaytonaSandbox(SandboxSpec(network=False), opened):
        pass
    assert [(c.network_block_all, c.network_allow_list) for c in fake.created] == [
        (False, "10.0.0.0/8"),
        (True, None),
    ]
    assert [spec.network for spec in fake.specs] == [True, False]


async def test_dockerfile_dir_is_built_by_daytona(
    fake: FakeDaytona, options: DaytonaOptions, tmp_path: Path
) -> None:
    dockerfile = "FROM debian:bookworm-slim\nRUN apt-get update\nENV LANG=C.UTF-8\n"
    (tmp_path / "Dockerfile").write_text(dockerfile)
    async with DaytonaSandbox(SandboxSpec(image=ImageSpec(dockerfile_dir=tmp_path)), options):
        pass
    (created,) = fake.created
    assert created.build_info is not None and created.build_info.dockerfile_content == dockerfile
    assert not created.build_info.context_hashes  # nothing to COPY, nothing uploaded


async def test_missing_dockerfile_is_a_clear_error(
    fake: FakeDaytona, options: DaytonaOptions, tmp_path: Path
) -> None:
    sandbox = DaytonaSandbox(SandboxSpec(image=ImageSpec(dockerfile_dir=tmp_path)), options)
    with pytest.raises(SandboxError, match="Dockerfile does not exist"):
        await sandbox.start()
    assert not fake.created


async def test_default_snapshot_cannot_take_resources(fake: FakeDaytona) -> None:
    spec = SandboxSpec(resources=Resources(cpus=4))
    with pytest.warns(RuntimeWarning, match="resources apply only"):
        async with DaytonaSandbox(
            spec, DaytonaOptions(api_key=API_KEY, api_url=fake.url, snapshot="ares-base")
        ):
            pass
    (created,) = fake.created
    assert created.snapshot == "ares-base" and created.cpu is None and created.build_info is None


# ---------------------------------------------------------------------------------------- exec
async def test_exec_separates_streams_and_reports_exit_code(
    fake: FakeDaytona, sandbox: DaytonaSandbox
) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code, result.timed_out) == ("out\n", "err\n", 3, False)
    assert not result.ok
    request = fake.executed[-1]
    assert request.cwd == "/srv/app" and request.timeout == 0 and request.envs is None
    assert (await sandbox.exec("true")).ok


async def test_exec_passes_env_cwd_and_stdin(fake: FakeDaytona, sandbox: DaytonaSandbox) -> None:
    assert (await sandbox.exec("printenv A", env={"A": "from-call"})).stdout == "from-call\n"
    assert fake.executed[-1].envs == {"A": "from-call"}
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
    assert (await sandbox.exec("cat", stdin=b"shout")).stdout == "shout"
    assert (await sandbox.exec("cat")).stdout == ""
    leftovers = [p for p in machine_of(fake, sandbox).files if p.startswith("/tmp/.ares-")]
    assert leftovers == []


async def test_exec_in_a_missing_cwd_fails(sandbox: DaytonaSandbox) -> None:
    result = await sandbox.exec("true", cwd="/does/not/exist")
    assert result.exit_code != 0 and "no such file" in result.stdout


async def test_exec_timeout_is_enforced_by_the_server(fake: FakeDaytona, sandbox: DaytonaSandbox) -> None:
    result = await sandbox.exec("sleep 30", timeout_s=0.5)
    assert result.timed_out and result.exit_code == 137 and not result.ok
    timed_out, cleanup = fake.executed[-2:]
    assert timed_out.timeout == 1  # whole seconds, rounded up
    assert cleanup.command.startswith("rm -f -- /tmp/.ares-")  # the killed wrapper's stderr file
    assert (await sandbox.exec("sleep 1", timeout_s=5)).ok


async def test_unresponsive_remote_is_deleted_at_the_client_deadline(fake: FakeDaytona) -> None:
    options = DaytonaOptions(api_key=API_KEY, api_url=fake.url, exec_grace_s=0.2)
    sandbox = DaytonaSandbox(SandboxSpec(), options)
    await sandbox.start()
    fake.hang_exec = True
    with pytest.raises(SandboxTimeoutError, match="did not answer") as raised:
        await sandbox.exec("true", timeout_s=0.1)
    assert isinstance(raised.value, SandboxCrashedError) and isinstance(raised.value, TimeoutError)
    assert fake.deleted and not fake.machines
    await sandbox.stop()


async def test_real_wrapper_leaves_nothing_behind_even_after_a_timeout(local_fake: FakeDaytona) -> None:
    options = DaytonaOptions(api_key=API_KEY, api_url=local_fake.url)
    async with DaytonaSandbox(SandboxSpec(), options) as sandbox:
        both = await sandbox.exec("cat; echo oops >&2; exit 4", stdin=b"in")
        assert (both.stdout, both.stderr, both.exit_code) == ("in", "oops\n", 4)
        killed = await sandbox.exec("cat > /dev/null; echo partial >&2; sleep 30", stdin=b"x", timeout_s=0.5)
        assert killed.timed_out and killed.exit_code == 137
        machine = local_fake.machines[sandbox.sandbox_id or ""]
        assert isinstance(machine, LocalMachine)
        left = await machine.sandbox.exec("ls -A /tmp; pgrep -c sleep || true", cwd="/")  # bypasses Daytona
        assert left.stdout == "0\n"


# ---------------------------------------------------------------------------------------- files
async def test_files_round_trip(fake: FakeDaytona, sandbox: DaytonaSandbox, tmp_path: Path) -> None:
    await sandbox.upload(
        {"a.txt": "alpha", "bin/run.sh": "#!/bin/sh\n", "blob": bytes(range(256))}, "/srv/app/in"
    )
    host_dir = tmp_path / "tree"
    (host_dir / "sub").mkdir(parents=True)
    (host_dir / "sub" / "b.txt").write_text("beta")
    await sandbox.upload(host_dir, "/srv/app/tree")
    (tmp_path / "single.txt").write_text("one")
    await sandbox.upload(tmp_path / "single.txt", "/srv/app/renamed.txt")

    assert await sandbox.read_file("/srv/app/in/a.txt") == b"alpha"
    assert await sandbox.read_file("/srv/app/in/blob") == bytes(range(256))
    assert await sandbox.read_file("/srv/app/tree/sub/b.txt") == b"beta"
    assert await sandbox.read_file("/srv/app/renamed.txt") == b"one"

    await sandbox.download("/srv/app/in", tmp_path / "back")
    assert (tmp_path / "back" / "a.txt").read_text() == "alpha"
    assert (tmp_path / "back" / "blob").read_bytes() == bytes(range(256))
    assert (tmp_path / "back" / "bin" / "run.sh").stat().st_mode & stat.S_IXUSR
    await sandbox.download("/srv/app/renamed.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "one"
    machine = machine_of(fake, sandbox)
    assert not [p for p in machine.files if p.startswith("/tmp/")]  # staged archives are removed
    assert not list(tmp_path.glob(".*.ares-download"))


async def test_missing_files_are_sandbox_errors(sandbox: DaytonaSandbox, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not found") as raised:
        await sandbox.read_file("/srv/app/missing")
    assert not isinstance(raised.value, SandboxCrashedError)
    with pytest.raises(SandboxError, match="download of /srv/app/missing failed"):
        await sandbox.download("/srv/app/missing", tmp_path / "x")


# ---------------------------------------------------------------------------------------- lifecycle
async def test_stop_deletes_the_sandbox_and_is_idempotent(fake: FakeDaytona, options: DaytonaOptions) -> None:
    factory = DaytonaSandboxFactory(options)
    sandbox = factory(SandboxSpec())
    assert isinstance(sandbox, Sandbox)
    await sandbox.start()
    sandbox_id = sandbox.sandbox_id
    await sandbox.stop()
    await sandbox.stop()
    assert fake.deleted == [sandbox_id] and not fake.machines
    with pytest.raises(SandboxError, match="not running"):
        await sandbox.exec("true")


async def test_vanished_sandbox_raises_crashed(fake: FakeDaytona, sandbox: DaytonaSandbox) -> None:
    await fake.vanish(sandbox.sandbox_id or "")
    with pytest.raises(SandboxCrashedError, match="no longer exists"):
        await sandbox.exec("true")
    await sandbox.stop()  # deleting what is already gone is not an error


# ---------------------------------------------------------------------------------------- errors
async def test_missing_credentials_name_the_variable(fake: FakeDaytona) -> None:
    with pytest.raises(SandboxUnavailableError, match="DAYTONA_API_KEY"):
        await DaytonaSandbox(SandboxSpec(), DaytonaOptions(api_url=fake.url)).start()
    assert not fake.created


async def test_rejected_key_is_unavailable(fake: FakeDaytona) -> None:
    with pytest.raises(SandboxUnavailableError, match="Check DAYTONA_API_KEY"):
        await DaytonaSandbox(SandboxSpec(), DaytonaOptions(api_key="wrong", api_url=fake.url)).start()


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (429, "Too many requests", "quota"),
        (403, "Total CPU limit exceeded", "permissions"),
        (400, "bad image", ""),
    ],
)
async def test_creation_failures_are_unavailable(
    fake: FakeDaytona, options: DaytonaOptions, status: int, message: str, hint: str
) -> None:
    fake.fail_create = (status, message)
    with pytest.raises(SandboxUnavailableError, match=message) as raised:
        await DaytonaSandbox(SandboxSpec(), options).start()
    assert hint in str(raised.value)


async def test_sandbox_left_by_a_timed_out_create_is_deleted(fake: FakeDaytona) -> None:
    fake.start_state = SandboxState.STARTING  # never becomes ready
    options = DaytonaOptions(api_key=API_KEY, api_url=fake.url, create_timeout_s=0.3)
    with pytest.raises(SandboxUnavailableError, match="create a sandbox"):
        await DaytonaSandbox(SandboxSpec(), options).start()
    assert len(fake.created) == 1 and len(fake.deleted) == 1 and not fake.machines


async def test_use_before_start_and_bad_timeouts_are_errors(
    options: DaytonaOptions, sandbox: DaytonaSandbox
) -> None:
    with pytest.raises(SandboxError, match="not running"):
        await DaytonaSandbox(SandboxSpec(), options).read_file("/etc/hostname")
    with pytest.raises(SandboxError, match="timeout_s must be positive"):
        await sandbox.exec("true", timeout_s=0)
