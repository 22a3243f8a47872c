"""Load a GGUF file as a plain float ``transformers`` model a trainer can update (extra ``train``).

transformers dequantizes GGUF weights to floats on load but keeps the model flagged as quantized
(``hf_quantizer``, ``config.quantization_config``), and ``Trainer`` (so TRL) then refuses to train
it. The weights are ordinary float tensors, so the flags are cleared after checking that they are.

Converting is slow (SmolLM2-135M: ~6 s for the tokenizer, ~12 s for the weights, mostly parsing the
GGUF's metadata), so the result is kept as an ordinary checkpoint directory in the ARES cache
(``$ARES_CACHE_DIR`` or ``~/.cache/ares``, under ``models/``), keyed by the file's path, size and
mtime and the transformers version. Later loads read it back in well under a second. Each part is
published with one ``rename`` of a finished directory, so a concurrent reader never sees half of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ares.images.cache import default_cache_dir

if TYPE_CHECKING:
    import torch


def load_gguf_as_float(path: str, dtype: torch.dtype | None = None, *, cache: bool = True) -> tuple[Any, Any]:
    """(model, tokenizer) from the GGUF at ``path``, dequantized to ``dtype``, trainable.

    ``dtype`` defaults to float32. ``cache=False`` converts from the GGUF every time and writes nothing.
    """
    import torch
    from transformers import AutoModelForCausalLM

    dtype = dtype or torch.float32

    def read(part: Path) -> Any:
        model = AutoModelForCausalLM.from_pretrained(part, dtype=dtype)
        _check_float(model, path)
        return model

    part = gguf_cache_dir(path) / str(dtype).removeprefix("torch.")
    tokenizer = load_gguf_tokenizer(path, cache=cache)
    return _through_cache(part, cache, read, lambda: _convert_model(path, dtype)), tokenizer


def load_gguf_tokenizer(path: str, *, cache: bool = True) -> Any:
    """The GGUF's tokenizer (with its chat template) as a transformers tokenizer."""
    from transformers import AutoTokenizer

    part = gguf_cache_dir(path) / "tokenizer"
    return _through_cache(part, cache, AutoTokenizer.from_pretrained, lambda: _convert_tokenizer(path))


def gguf_cache_dir(path: str) -> Path:
    """Where the converted parts of the GGUF at ``path`` are kept."""
    import transformers

    real = os.path.realpath(path)
    st = os.stat(real)
    identity = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{transformers.__version__}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return default_cache_dir() / "models" / f"{Path(real).stem}-{key}"


def _through_cache(part: Path, cache: bool, read: Callable[[Path], Any], convert: Callable[[], Any]) -> Any:
    """``read(part)`` when the cache holds it; else ``convert()``, saved to ``part`` when caching."""
    if cache and part.is_dir():
        return read(part)
    converted = convert()
    if cache:
        try:
            _publish(part, converted.save_pretrained)
        except OSError as exc:  # e.g. a read-only or full cache: the load itself still succeeds
            warnings.warn(f"not cached ({part}): {exc}", RuntimeWarning, stacklevel=3)
    return converted


def _publish(target: Path, write: Callable[[str], object]) -> None:
    """``write(dir)`` into a fresh directory, then rename it to ``target`` (a concurrent writer
    that got there first wins; its copy is the same)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent)
    try:
        write(scratch)
        try:
            os.rename(scratch, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(scratch)


def _convert_model(path: str, dtype: torch.dtype) -> Any:
    from transformers import AutoModelForCausalLM

    folder, name = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    _check_float(model, path)
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def _convert_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    folder, name = os.path.split(os.path.abspath(path))
    return AutoTokenizer.from_pretrained(folder, gguf_file=name)


def _check_float(model: Any, path: str) -> None:
    odd = {p.dtype for p in model.parameters() if not p.dtype.is_floating_point}
    if odd:
        raise ValueError(f"{path}: weights still quantized after loading ({odd}); cannot train them")
