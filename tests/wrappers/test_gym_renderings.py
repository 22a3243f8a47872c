"""Observation/action renderings: LLM objects, OpenAI messages and text, token ids (byte tokenizers)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import ares
from ares.agents.bash import BashActionFormat
from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.policies.scripted import oracle_command
from ares.wrappers.gym import AresGymEnv, ChatMessagesSpace, TextSpace, make_codec
from ares.wrappers.gym.render import chatml

FMT = BashActionFormat()
REQUEST = LLMRequest(messages=(Message("user", "héllo"),), system_prompt="be brief")


class ByteTokenizer:
    """The smallest real tokenizer: one token per UTF-8 byte."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def __len__(self) -> int:
        return 256


class TemplatedBytes(ByteTokenizer):
    """A byte tokenizer that renders chats itself in a made-up format: the codec's chat-template
    protocol without Hugging Face."""

    def apply_chat_template(
        self, conversation: list[dict[str, Any]], *, add_generation_prompt: bool = False, **_: Any
    ) -> list[int]:
        turns = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in conversation)
        return self.encode(turns + ("<assistant>" if add_generation_prompt else ""))


BYTES = ByteTokenizer()
TEMPLATED = TemplatedBytes()


# --- the codec on its own --------------------------------------------------------------------


def test_object_rendering_passes_the_values_through() -> None:
    codec = make_codec()
    assert codec.observe(REQUEST) is REQUEST
    response = LLMResponse(content="hi")
    assert codec.act(response) is response
    with pytest.raises(TypeError, match=r"expects an ares\.LLMResponse, got dict"):
        codec.act({"content": "hi"})


def test_messages_and_text_rendering() -> None:
    codec = make_codec("messages", "text")
    messages = codec.observe(REQUEST)
    assert messages == request_to_openai(REQUEST)["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages in codec.observation_space and codec.observe(REQUEST) is not messages
    assert isinstance(codec.observation_space, ChatMessagesSpace) and isinstance(
        codec.action_space, TextSpace
    )
    assert codec.act("ok") == LLMResponse(content="ok")
    with pytest.raises(TypeError, match="expects a str"):
        codec.act(LLMResponse(content="ok"))


def test_token_rendering_uses_the_tokenizers_own_template_or_the_requests_own_ids() -> None:
    codec = make_codec("tokens", "tokens", TEMPLATED)
    ids = codec.observe(REQUEST)
    assert ids.dtype == np.int64 and ids.ndim == 1 and ids in codec.observation_space
    assert BYTES.decode(ids.tolist()) == "<system>be brief</system><user>héllo</user><assistant>"
    exact = LLMRequest(messages=REQUEST.messages, prompt_token_ids=(9, 8, 7))
    assert codec.observe(exact).tolist() == [9, 8, 7]
    assert make_codec("tokens").observe(exact).tolist() == [9, 8, 7]  # no tokenizer needed then
    with pytest.raises(ValueError, match="no prompt_token_ids; pass tokenizer"):
        make_codec("tokens").observe(REQUEST)


def test_a_tokenizer_without_a_chat_template_is_refused_unless_a_render_is_chosen() -> None:
    with pytest.raises(ValueError, match=r"no chat template.*render='chatml'"):
        make_codec("tokens", tokenizer=BYTES)
    chatml_ids = make_codec("tokens", "tokens", BYTES, render="chatml").observe(REQUEST)
    assert (
        BYTES.decode(chatml_ids.tolist())
        == chatml(REQUEST)
        == (
            "<|im_start|>system\nbe brief<|im_end|>\n"
            "<|im_start|>user\nhéllo<|im_end|>\n<|im_start|>assistant\n"
        )
    )
    shouted = make_codec("tokens", tokenizer=TEMPLATED, render=lambda r: r.messages[-1].text.upper())
    assert BYTES.decode(shouted.observe(REQUEST).tolist()) == "HÉLLO"  # an explicit render beats the template
    assert make_codec(action="tokens", tokenizer=BYTES).action == "tokens"  # decoding needs no template


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"observation": "tokens", "tokenizer": BYTES, "render": "llama"},
            ValueError,
            "one of \\['chatml'\\]",
        ),
        ({"observation": "tokens", "tokenizer": BYTES, "render": 3}, TypeError, "function LLMRequest -> str"),
        (
            {"observation": "messages", "tokenizer": BYTES, "render": "chatml"},
            ValueError,
            "observation='tokens'",
        ),
        ({"observation": "tokens", "render": "chatml"}, ValueError, "needs tokenizer"),
    ],
)
def test_bad_render_settings_fail_early(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make_codec(**kwargs)


@pytest.mark.parametrize("ids", [[104, 105], (104, 105), np.array([104, 105], dtype=np.int32)])
def test_token_actions_decode_and_keep_their_ids(ids: object) -> None:
    response = make_codec(action="tokens", tokenizer=BYTES).act(ids)
    assert response == LLMResponse(content="hi", token_ids=(104, 105))
    assert all(type(t) is int for t in response.token_ids or ())


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        ("hi", TypeError, "1-D sequence of int token ids"),
        (104, TypeError, "got int"),
        (np.array([[1, 2]]), ValueError, "shape \\(1, 2\\)"),
        ([1.5, 2.0], TypeError, "dtype float64"),
        ([1, 256], ValueError, "\\[0, 256\\)"),
        ([-1], ValueError, "\\[0, 256\\)"),
    ],
)
def test_bad_token_actions_name_the_expected_form(action: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make_codec(action="tokens", tokenizer=BYTES).act(action)


def test_bad_codec_settings_fail_early() -> None:
    with pytest.raises(ValueError, match="observation must be one of"):
        make_codec("pixels")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="action must be one of"):
        make_codec(action="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs tokenizer"):
        make_codec(action="tokens")
    with pytest.raises(TypeError, match="encode"):
        make_codec("tokens", tokenizer=object())  # type: ignore[arg-type]
    assert make_codec("tokens").observation_space.feature_space.n == 2**31 - 1  # type: ignore[attr-defined]


# --- the renderings on a real environment ----------------------------------------------------


def test_messages_and_text_solve_a_real_task() -> None:
    with AresGymEnv(ares.make("humaneval", tasks="0:1"), observation="messages", action="text") as env:
        obs, _ = env.reset()
        assert obs in env.observation_space and obs[0]["role"] == "system" and obs[1]["role"] == "user"
        task = env.unwrapped_ares.task  # type: ignore[attr-defined]
        obs, *_ = env.step(FMT.command(oracle_command(task)).content)
        assert [m["role"] for m in obs[-2:]] == ["assistant", "user"] and "Exit code: 0" in obs[-1]["content"]
        _, reward, terminated, truncated, _ = env.step(FMT.submit().content)
        assert (reward, terminated, truncated) == (1.0, True, False)


def test_tokens_solve_a_real_task_with_a_byte_tokenizer() -> None:
    with AresGymEnv(
        ares.make("humaneval", tasks="0:1"), observation="tokens", action="tokens", tokenizer=TEMPLATED
    ) as env:
        obs, _ = env.reset()
        assert obs in env.observation_space
        prompt = BYTES.decode(obs.tolist())
        assert prompt.startswith("<system>") and prompt.endswith("</user><assistant>")
        task = env.unwrapped_ares.task  # type: ignore[attr-defined]
        obs, *_ = env.step(np.array(BYTES.encode(FMT.command(oracle_command(task)).content or "")))
        assert "Exit code: 0" in BYTES.decode(obs.tolist())
        _, reward, terminated, _, _ = env.step(BYTES.encode(FMT.submit().content or ""))
        assert (reward, terminated) == (1.0, True)


@pytest.mark.parametrize(
    ("observation", "action"), [("messages", "text"), ("tokens", "tokens"), ("tokens", "text")]
)
def test_check_env_passes_in_every_rendering(observation: str, action: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = AresGymEnv(
            ares.make("humaneval", tasks="0:3"),
            observation=observation,
            action=action,
            tokenizer=TEMPLATED,  # type: ignore[arg-type]
        )
        with env:
            check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
