"""The float conversion of a GGUF is cached: a later load reads back exactly what was converted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, installed_default_model
from ares.training import gguf

pytest.importorskip("torch", reason="needs the train extra (torch)")
pytest.importorskip("gguf", reason="loading the GGUF into transformers needs gguf")
if installed_default_model() is None:
    pytest.skip(f"converts the packaged SmolLM2 model: {MODEL_INSTALL_COMMAND}", allow_module_level=True)


def never(*_: Any, **__: Any) -> Any:
    raise AssertionError("converted from the GGUF although the cache holds it")


def test_a_cached_load_is_the_conversion_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ares.llm.local.default_model import default_model_path

    monkeypatch.setenv("ARES_CACHE_DIR", str(tmp_path))
    path = default_model_path()
    converted, tokenizer = gguf.load_gguf_as_float(path)
    entry = gguf.gguf_cache_dir(path)
    assert entry.parent == tmp_path / "models"
    assert sorted(p.name for p in entry.iterdir()) == ["float32", "tokenizer"]  # no scratch dir left

    monkeypatch.setattr(gguf, "_convert_model", never)
    monkeypatch.setattr(gguf, "_convert_tokenizer", never)
    cached, cached_tokenizer = gguf.load_gguf_as_float(path)
    assert getattr(cached, "hf_quantizer", None) is None  # a trainer accepts it
    assert "quantization_config" not in cached.config.to_dict()
    assert cached.lm_head.weight.data_ptr() == cached.model.embed_tokens.weight.data_ptr()  # still tied
    ours, theirs = converted.state_dict(), cached.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)

    messages = [{"role": "system", "content": "Answer in code."}, {"role": "user", "content": "héllo ➞ 世界"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert cached_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == text
    ids = tokenizer(text + "def f():\n\treturn 1  # ✓").input_ids
    assert cached_tokenizer(text + "def f():\n\treturn 1  # ✓").input_ids == ids
    for special in ("eos_token", "pad_token", "bos_token"):
        assert getattr(cached_tokenizer, special) == getattr(tokenizer, special)
    with torch.no_grad():
        batch = torch.tensor([ids])
        assert torch.equal(converted(batch).logits, cached(batch).logits)


def test_without_the_cache_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARES_CACHE_DIR", str(tmp_path / "cache"))
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"GGUF")
    calls: list[str] = []
    monkeypatch.setattr(gguf, "_convert_model", lambda path, dtype: calls.append("model") or "model")
    monkeypatch.setattr(gguf, "_convert_tokenizer", lambda path: calls.append("tokenizer") or "tokenizer")
    assert gguf.load_gguf_as_float(str(model_file), cache=False) == ("model", "tokenizer")
    assert gguf.load_gguf_tokenizer(str(model_file), cache=False) == "tokenizer"
    assert calls == ["tokenizer", "model", "tokenizer"]
    assert not (tmp_path / "cache").exists()


def test_a_changed_file_gets_its_own_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARES_CACHE_DIR", str(tmp_path / "cache"))
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"GGUF one")
    first = gguf.gguf_cache_dir(str(model_file))
    assert first.name.startswith("tiny-") and first.parent == tmp_path / "cache" / "models"
    os.utime(model_file, ns=(1, 1))
    touched = gguf.gguf_cache_dir(str(model_file))
    model_file.write_bytes(b"GGUF two, longer")
    os.utime(model_file, ns=(1, 1))
    assert len({first, touched, gguf.gguf_cache_dir(str(model_file))}) == 3


def test_a_part_another_process_published_first_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m-0123" / "tokenizer"
    target.mkdir(parents=True)
    (target / "tokenizer.json").write_text("theirs")
    gguf._publish(target, lambda d: Path(d, "tokenizer.json").write_text("ours"))
    assert (target / "tokenizer.json").read_text() == "theirs"
    assert [p.name for p in target.parent.iterdir()] == ["tokenizer"]  # our scratch copy is gone

    fresh = tmp_path / "models" / "m-4567" / "float32"
    gguf._publish(fresh, lambda d: Path(d, "model.safetensors").write_text("weights"))
    assert (fresh / "model.safetensors").read_text() == "weights"
    assert [p.name for p in fresh.parent.iterdir()] == ["float32"]


def test_a_failed_conversion_publishes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m-89ab" / "float32"

    def broken(directory: str) -> None:
        Path(directory, "model.safetensors").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        gguf._publish(target, broken)
    assert list(target.parent.iterdir()) == []


def test_an_unwritable_cache_still_loads_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("ARES_CACHE_DIR", str(blocker))
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"GGUF")

    class Converted:
        def save_pretrained(self, directory: str) -> None:
            raise AssertionError("nowhere to save")

    converted = Converted()
    monkeypatch.setattr(gguf, "_convert_tokenizer", lambda path: converted)
    with pytest.warns(RuntimeWarning, match="not cached"):
        assert gguf.load_gguf_tokenizer(str(model_file)) is converted
    assert blocker.is_file()
