"""Reading /logs/verifier on the host: strict rewards, bounded files, no link or FIFO followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ares.errors import VerifierError
from ares.tasks import reward_files
from ares.tasks.reward_files import (
    parse_reward_json,
    parse_reward_txt,
    read_log_files,
    read_rewards,
    reward_from,
)


def test_json_wins_over_text() -> None:
    assert reward_from({"reward.json": '{"a": 0.25, "b": 0.5}', "reward.txt": "1"}) == (
        0.75,
        {"a": 0.25, "b": 0.5},
    )
    assert reward_from({"reward.txt": " 0.5\n"}) == (0.5, {})
    assert reward_from({}) is None


@pytest.mark.parametrize(
    "text",
    ["", "[1]", "{}", '{"reward": true}', '{"reward": "1"}', '{"reward": NaN}', '{"x": Infinity}', "{"],
)
def test_bad_reward_json_is_an_error(text: str) -> None:
    with pytest.raises(VerifierError):
        parse_reward_json(text)


@pytest.mark.parametrize("text", ["", "one", "1 2", "nan", "inf", "-inf"])
def test_bad_reward_txt_is_an_error(text: str) -> None:
    with pytest.raises(VerifierError):
        parse_reward_txt(text)


def test_reward_symlink_is_refused_and_its_target_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("1\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.txt").symlink_to(secret)
    with pytest.raises(VerifierError, match=r"reward\.txt"):
        read_rewards(logs)
    files = read_log_files(logs)
    assert files.files == {} and files.skipped == ("reward.txt (symlink)",)


def test_reward_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reward.json")
    with pytest.raises(VerifierError, match="not a regular file"):
        read_rewards(tmp_path)
    assert read_log_files(tmp_path).skipped == ("reward.json (special file)",)


def test_oversized_reward_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("1" + " " * reward_files.MAX_REWARD_BYTES)
    with pytest.raises(VerifierError, match="over"):
        read_rewards(tmp_path)


def test_log_files_are_kept_bounded_and_sorted(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test-output.txt").write_text("FAILED test_x\n")
    big = b"head-" + b"x" * (2 * reward_files.MAX_FILE_BYTES) + b"-tail"
    (tmp_path / "big.log").write_bytes(big)
    files = read_log_files(tmp_path)
    assert list(files.files) == ["big.log", "reward.txt", "sub/test-output.txt"]
    assert files.files["sub/test-output.txt"] == "FAILED test_x\n"
    text = files.files["big.log"]
    assert text.startswith("head-") and text.endswith("-tail") and "bytes of this file omitted" in text
    assert len(text) < reward_files.MAX_FILE_BYTES + 100


def test_too_many_files_are_listed_not_read(tmp_path: Path) -> None:
    for i in range(reward_files.MAX_FILES + 5):
        (tmp_path / f"f{i:03d}").write_text("x")
    files = read_log_files(tmp_path)
    assert len(files.files) == reward_files.MAX_FILES
    assert len(files.skipped) == 5
