"""The LLM I/O specs: what validate() accepts, how it rejects, and that they behave as dm_env specs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from dm_env import specs

from ares.llm.types import LLMRequest, LLMResponse, ToolCall, user
from ares.wrappers.dm_env import ChatMessagesSpec, LLMRequestSpec, LLMResponseSpec, TextSpec, object_scalar

REQUEST = LLMRequest(messages=(user("hi"),), system_prompt="be brief")
RESPONSE = LLMResponse(content="```bash\nls\n```", tool_calls=(ToolCall("c1", "f", "{}"),))


def test_object_scalar_keeps_sequences_whole() -> None:
    array = object_scalar([1, 2])
    assert array.shape == () and array.dtype == object and array.item() == [1, 2]


def test_request_spec_accepts_requests_bare_or_as_scalars() -> None:
    spec = LLMRequestSpec(name="observation")
    for value in (REQUEST, object_scalar(REQUEST)):
        validated = spec.validate(value)
        assert validated.shape == () and validated.item() is REQUEST
    assert isinstance(spec.generate_value(), LLMRequest)
    spec.validate(spec.generate_value())


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("hi", "Expected an ares.LLMRequest but found str for spec observation"),
        (None, "Expected an ares.LLMRequest but found None"),
        (LLMRequest(messages=("hi",)), "messages to hold only ares.Message"),  # type: ignore[arg-type]
        (np.array([REQUEST, REQUEST]), r"Expected a scalar \(shape \(\)\) but found shape \(2,\)"),
    ],
)
def test_request_spec_rejects_other_values(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LLMRequestSpec(name="observation").validate(value)


def test_optional_spec_accepts_none_only_when_optional() -> None:
    assert LLMRequestSpec(optional=True).validate(None).item() is None
    assert LLMRequestSpec(optional=True) != LLMRequestSpec()
    assert LLMRequestSpec(optional=True).replace(name="o").optional
    assert ChatMessagesSpec(optional=True).validate(object_scalar(None)).item() is None
    with pytest.raises(ValueError, match="found None"):
        ChatMessagesSpec().validate(None)


def test_response_spec_checks_type_content_and_tool_calls() -> None:
    spec = LLMResponseSpec(name="action")
    assert spec.validate(RESPONSE).item() is RESPONSE
    assert spec.generate_value() == LLMResponse(content="")
    with pytest.raises(ValueError, match=r"found str: wrap the text with ares.llm.text_response\(text\)"):
        spec.validate("ls")
    with pytest.raises(ValueError, match="content to be a str or None but found int"):
        spec.validate(LLMResponse(content=3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"tool_calls to hold only ares\.ToolCall"):
        spec.validate(LLMResponse(tool_calls=({"name": "f"},)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="found dict for spec action"):
        spec.validate({"content": "ls"})


def test_chat_messages_spec_uses_the_openai_wire_rules() -> None:
    spec = ChatMessagesSpec(name="observation")
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert spec.validate(object_scalar(chat)).item() == chat
    with pytest.raises(ValueError, match="Expected a list of OpenAI chat messages but found dict"):
        spec.validate(chat[0])
    with pytest.raises(ValueError, match=r"messages\[0\].role must be one of .* got 'robot'"):
        spec.validate([{"role": "robot", "content": "beep"}])
    generated = spec.generate_value()
    generated.append({"role": "user", "content": "mutated"})
    assert len(spec.generate_value()) == 1  # each call returns a fresh copy


def test_text_spec_is_a_string_array_of_one_str() -> None:
    spec = TextSpec("```bash\ntrue\n```", name="action")
    assert isinstance(spec, specs.StringArray)
    assert spec.validate(spec.generate_value()).item() == "```bash\ntrue\n```"
    with pytest.raises(ValueError, match=r"found an ares\.LLMResponse: pass its content"):
        spec.validate(RESPONSE)
    with pytest.raises(ValueError, match="Expected all elements to be of type"):
        spec.validate(7)


def test_an_invalid_example_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match=r"example of LLMResponseSpec is not valid: .*found str"):
        LLMResponseSpec("ls")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="example of TextSpec must be a str"):
        TextSpec(RESPONSE)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    [
        LLMRequestSpec(REQUEST, name="obs"),
        LLMResponseSpec(RESPONSE, name="act"),
        ChatMessagesSpec(),
        TextSpec("x"),
    ],
)
def test_specs_replace_pickle_and_compare_like_dm_env_specs(spec: specs.Array) -> None:
    renamed = spec.replace(name="renamed")
    assert type(renamed) is type(spec) and renamed.name == "renamed"
    assert renamed.generate_value() == spec.generate_value()
    restored = pickle.loads(pickle.dumps(spec))
    assert type(restored) is type(spec) and restored == spec
    assert restored.generate_value() == spec.generate_value()
    assert spec != specs.Array((), object) and specs.Array((), object) != spec
    others = [LLMRequestSpec(), LLMResponseSpec(), ChatMessagesSpec(), TextSpec()]
    assert [other == spec for other in others] == [type(other) is type(spec) for other in others]


def test_specs_share_the_adapters_field_checks() -> None:
    """A response whose fields have the wrong types fails like it does in the gym spaces."""
    bad = LLMResponse(content="ls", token_ids=(1, -5))  # token ids must be non-negative
    with pytest.raises(ValueError, match=r"well-formed ares\.LLMResponse"):
        LLMResponseSpec().validate(bad)
