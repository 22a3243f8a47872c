"""`ares export` errors are one line and keep what Rich would read as markup (paths, install hints)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from aligned_data import episode, write_records

from ares.cli.export import export
from ares.records import JsonDirCollector


def test_errors_keep_their_brackets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "runs[/x]" / "ares[parquet]"
    with pytest.raises(typer.Exit) as exited:
        export(missing, fmt="sft", out=None, only_successful=False, per_turn=False)
    assert exited.value.exit_code == 2
    assert capsys.readouterr().err == f"error: {missing} does not exist\n"


def test_per_turn_is_for_sft_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_records([episode("ep")], JsonDirCollector(tmp_path / "trajectories"))
    with pytest.raises(typer.Exit):
        export(tmp_path, fmt="parquet", out=None, only_successful=False, per_turn=True)
    assert "--per-turn applies to --format sft only" in capsys.readouterr().err
    export(tmp_path, fmt="sft", out=tmp_path / "p.jsonl", only_successful=False, per_turn=True)
    assert "1/1 episodes -> 3 prompt/completion rows" in capsys.readouterr().out
