"""Load a GGUF file as a plain float ``transformers`` model a trainer can update (extra ``train``).

transformers dequantizes GGUF weights to floats on load but keeps the model flagged as quantized
(``hf_quantizer``, ``config.quantization_config``), and ``Trainer`` (so TRL) then refuses to train
it. The weights are ordinary float tensors, so the flags are cleared after checking that they are.
"""

from __future__ import annotations

import os
from typing import Any

import torch


def load_gguf_as_float(path: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """(model, tokenizer) from the GGUF at ``path``, dequantized to ``dtype``, trainable."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(os.path.abspath(path))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    odd = {p.dtype for p in model.parameters() if not p.dtype.is_floating_point}
    if odd:
        raise ValueError(f"{path}: weights still quantized after loading ({odd}); cannot train them")
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer
