"""/logs/verifier from an in-memory tar: the same rewards, files and refusals as the host walk.

The archives are made by real tar programs from real directories (GNU tar's plain headers, and
Python's PAX and GNU formats, which take the ``tarfile`` path), and each reading is compared with
``reward_files`` reading the same directory on the host.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from ares.errors import VerifierError
from ares.tasks import reward_files
from ares.tasks.reward_archive import _byte_sum, _plain_entries, read_logs_archive
from ares.tasks.reward_files import read_log_files, read_rewards


def gnu_tar(logs: Path) -> bytes:
    """What a backend's ``archive("/logs/verifier")`` gives: members named ``verifier/...``."""
    if shutil.which("tar") is None:
        pytest.skip("no tar program")
    return subprocess.run(
        ["tar", "-cf", "-", "-C", str(logs.parent), logs.name], check=True, capture_output=True
    ).stdout


def python_tar(logs: Path, fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        tar.add(logs, arcname=logs.name)
    return out.getvalue()


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A verifier's logs with every kind of entry the rules care about."""
    logs = tmp_path / "verifier"
    logs.mkdir()
    (logs / "reward.json").write_text('{"reward": 0.5, "tests": 1}')
    (logs / "reward.txt").write_text("0.5\n")
    (logs / "sub").mkdir()
    (logs / "sub" / "test-output.txt").write_text("FAILED test_x\n")
    (logs / "sub-b").write_text("after sub/ in the walk\n")
    (logs / "big.log").write_bytes(b"head-" + b"x" * (2 * reward_files.MAX_FILE_BYTES) + b"-tail")
    (logs / "link").symlink_to("/etc/passwd")
    os.mkfifo(logs / "pipe")
    (logs / "caf\u00e9.txt").write_text("accent\n")
    return logs


@pytest.mark.parametrize("make", ["gnu-tar", "pax", "gnu"])
def test_an_archive_reads_as_the_host_directory_does(logs: Path, make: str) -> None:
    data = {
        "gnu-tar": lambda: gnu_tar(logs),
        "pax": lambda: python_tar(logs, tarfile.PAX_FORMAT),
        "gnu": lambda: python_tar(logs, tarfile.GNU_FORMAT),
    }[make]()
    rewards, files = read_logs_archive(data)
    assert rewards == read_rewards(logs)
    assert files == read_log_files(logs)
    assert list(files.files)[:2] == ["big.log", "caf\u00e9.txt"] and "link (symlink)" in files.skipped
    if make == "gnu-tar":  # plain headers: read without tarfile
        assert _plain_entries(data) is not None


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_a_reward_that_is_a_link_is_refused_and_never_followed(tmp_path: Path, fmt: int) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("1\n")
    logs = tmp_path / "verifier"
    logs.mkdir()
    (logs / "reward.txt").symlink_to(secret)
    with pytest.raises(VerifierError, match=r"reward\.txt is not a regular file"):
        read_logs_archive(python_tar(logs, fmt))


def test_an_oversized_reward_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "verifier"
    logs.mkdir()
    (logs / "reward.txt").write_text("1" + " " * reward_files.MAX_REWARD_BYTES)
    with pytest.raises(VerifierError, match="over"):
        read_logs_archive(gnu_tar(logs))


def test_too_many_files_are_listed_not_read(tmp_path: Path) -> None:
    logs = tmp_path / "verifier"
    logs.mkdir()
    for i in range(reward_files.MAX_FILES + 5):
        (logs / f"f{i:03d}").write_text("x")
    assert read_logs_archive(gnu_tar(logs))[1] == read_log_files(logs)


def read_or_refuse(data: bytes) -> dict[str, str]:
    try:
        return read_logs_archive(data)[0]
    except VerifierError as exc:
        assert "malformed archive" in str(exc)
        return {}


def test_a_damaged_archive_never_yields_a_reward(tmp_path: Path) -> None:
    """Refused, or read up to the damage as tarfile reads it (a docker download does the same); the
    verifier then reports that no reward was written, never a reward from damaged bytes."""
    logs = tmp_path / "verifier"
    logs.mkdir()
    (logs / "reward.txt").write_text("1\n")
    data = gnu_tar(logs)
    assert read_logs_archive(data)[0] == {"reward.txt": "1\n"}
    header = next(i for i in range(0, len(data), 512) if data[i : i + 17] == b"verifier/reward.t")
    assert read_or_refuse(data[:header] + b"\xff" + data[header + 1 :]) == {}  # checksum off
    assert read_or_refuse(data[: header + 512 + 2]) == {}  # cut inside the reward's data


def test_the_header_byte_sum_is_exact_for_any_header() -> None:
    """The checksum's byte sum comes from Adler-32 halves: exact even at the extremes (all 0xff
    bytes sum to 130,560, past Adler's modulus of 65,521 for a whole header)."""
    rng = random.Random(31)
    blocks = [bytes(512), b"\xff" * 512, b"\xff" * 256 + bytes(256), bytes(256) + b"\xff" * 256]
    blocks += [rng.randbytes(512) for _ in range(2000)]
    for block in blocks:
        assert _byte_sum(block) == sum(block)
