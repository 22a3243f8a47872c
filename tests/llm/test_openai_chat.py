"""Round trips between ARES LLM values and the OpenAI Chat Completions wire format."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_kit import (
    EXTRAS,
    FLOAT,
    INT,
    JSON,
    OPENAI_TOOL_CALL,
    OPT_TEXT,
    TEXT,
    assert_rejects,
    assert_value_round_trips,
    llm_requests,
    llm_responses,
    optional,
)

from ares.errors import LLMError, MalformedResponseError
from ares.llm.openai_chat import (
    COST_KEY,
    METADATA_KEY,
    NO_SYSTEM_PROMPT_KEY,
    PROMPT_TOKEN_IDS_KEY,
    request_from_openai,
    request_to_openai,
    response_from_openai,
    response_to_openai,
    strip_extensions,
)
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage, system, user

# --- recorded-looking traffic -------------------------------------------------------------------

AGENT_BODY: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are a careful software engineer."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix the failing test."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_Qm1xZ",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pytest -x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_Qm1xZ", "content": "1 failed, 3 passed"},
        {"role": "user", "content": "Go on.", "name": "driver"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a shell command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "temperature": 0.2,
    "top_p": 1,
    "max_completion_tokens": 4096,
    "stop": "</done>",
    "seed": 7,
    "n": 1,
    "user": "episode-17",
}

OPENAI_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Running the tests.",
                "tool_calls": [
                    {
                        "id": "call_8fK2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command":"pytest"}'},
                    }
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": {
                "content": [
                    {"token": "Running", "logprob": -0.0031, "bytes": [82, 117], "top_logprobs": []},
                    {"token": " the", "logprob": -1.5, "bytes": [32, 116], "top_logprobs": []},
                ],
                "refusal": None,
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 1117,
        "completion_tokens": 46,
        "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": 0},
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}

VLLM_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-5f2d0c3e8b7a4a51",
    "object": "chat.completion",
    "created": 1752000000,
    "model": "Qwen/Qwen3-8B",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ls", "reasoning_content": None, "tool_calls": []},
            "logprobs": None,
            "finish_reason": "stop",
            "stop_reason": None,
            "token_ids": [3342, 151645],
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22, "prompt_tokens_details": None},
    "prompt_logprobs": None,
    "prompt_token_ids": [151644, 872, 198],
    "kv_transfer_params": None,
}


def test_agent_body_parses_into_our_types() -> None:
    req = request_from_openai(AGENT_BODY)
    assert req.system_prompt == "You are a careful software engineer."
    assert req.model == "gpt-4o-mini"
    assert [m.role for m in req.messages] == ["user", "assistant", "tool", "user"]
    parts = req.messages[0].content
    assert isinstance(parts, tuple) and parts[1]["image_url"]["detail"] == "low"
    assert req.messages[0].text == "Fix the failing test."
    assert req.messages[1].tool_calls == (ToolCall("call_Qm1xZ", "bash", '{"command": "pytest -x"}'),)
    assert req.messages[2].tool_call_id == "call_Qm1xZ"
    assert req.messages[3].name == "driver"
    assert req.tools[0]["function"]["name"] == "bash"
    assert req.sampling.temperature == 0.2 and req.sampling.stop == ("</done>",) and req.sampling.seed == 7
    assert req.sampling.extra == {"max_completion_tokens": 4096, "n": 1, "stop": "</done>"}
    assert req.extra == {"tool_choice": "auto", "parallel_tool_calls": False, "user": "episode-17"}


def test_agent_body_round_trips_exactly() -> None:
    assert request_to_openai(request_from_openai(AGENT_BODY)) == AGENT_BODY


def test_request_renders_system_prompt_first_and_sampling() -> None:
    req = LLMRequest(
        messages=(user("hi"),),
        system_prompt="be brief",
        sampling=SamplingParams(temperature=0.0, max_tokens=16, stop=("\n",), extra={"top_k": 5}),
        extra={"response_format": {"type": "json_object"}},
    )
    assert request_to_openai(req) == {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 16,
        "stop": ["\n"],
        "top_k": 5,
        "response_format": {"type": "json_object"},
    }


def test_token_ids_and_metadata_travel_in_extension_keys_that_strip_removes() -> None:
    req = LLMRequest(messages=(user("hi"),), model="m", prompt_token_ids=(1, 2, 3), metadata={"step": 4})
    body = request_to_openai(req)
    assert body[PROMPT_TOKEN_IDS_KEY] == [1, 2, 3] and body[METADATA_KEY] == {"step": 4}
    assert request_from_openai(body) == req
    assert strip_extensions(body) == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_leading_system_message_without_system_prompt_is_not_absorbed() -> None:
    req = LLMRequest(messages=(system("a"), user("b")))
    body = request_to_openai(req)
    assert body[NO_SYSTEM_PROMPT_KEY] is True
    assert request_from_openai(body) == req
    with_prompt = LLMRequest(messages=(system("a"), user("b")), system_prompt="s")
    assert NO_SYSTEM_PROMPT_KEY not in request_to_openai(with_prompt)
    assert request_from_openai(request_to_openai(with_prompt)) == with_prompt


def test_leading_system_message_with_extra_keys_stays_a_message() -> None:
    body = {
        "messages": [{"role": "system", "content": "a", "name": "policy"}, {"role": "user", "content": "b"}]
    }
    req = request_from_openai(body)
    assert req.system_prompt is None and req.messages[0].name == "policy"
    assert request_to_openai(req) == body


def test_message_extra_and_null_content_survive() -> None:
    msg = Message("assistant", None, extra={"reasoning_content": "think", "content": None})
    body = request_to_openai(LLMRequest(messages=(msg,)))
    assert body["messages"] == [{"role": "assistant", "reasoning_content": "think", "content": None}]
    assert request_from_openai(body).messages == (msg,)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ([], "the body must be an object"),
        ({}, "messages must be an array, got null"),
        ({"messages": [{"role": "wizard"}]}, "messages[0].role must be one of"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content must be an array"),
        ({"messages": [], "temperature": "hot"}, "temperature must be a number"),
        ({"messages": [], "max_tokens": True}, "max_tokens must be an integer or null, got a boolean"),
        ({"messages": [], "stop": [1]}, "stop[0] must be a string"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f"}}]}]},
            "messages[0].tool_calls[0].function.arguments must be a string, got null",
        ),
    ],
)
def test_malformed_request_bodies_raise_llm_error(body: Any, where: str) -> None:
    assert_rejects(request_from_openai, body, LLMError, "malformed OpenAI chat completion request", where)


# --- responses ------------------------------------------------------------------------------------


def test_openai_response_parses_and_round_trips() -> None:
    resp = response_from_openai(OPENAI_RESPONSE)
    assert resp.id == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG" and resp.model == "gpt-4o-2024-08-06"
    assert resp.content == "Running the tests." and resp.finish_reason == "tool_calls"
    assert resp.tool_calls == (ToolCall("call_8fK2", "bash", '{"command":"pytest"}'),)
    assert resp.logprobs == (-0.0031, -1.5) and resp.token_ids is None
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (1117, 46)
    assert resp.usage.total_tokens == 1163 and "total_tokens" not in resp.usage.extra
    assert resp.extra["system_fingerprint"] == "fp_fc9f1d7035" and resp.extra["created"] == 1741570283
    assert resp.extra["ares_message"] == {"refusal": None, "annotations": []}
    assert response_to_openai(resp) == OPENAI_RESPONSE


def test_vllm_response_with_token_ids_round_trips() -> None:
    resp = response_from_openai(VLLM_RESPONSE)
    assert resp.token_ids == (3342, 151645) and resp.tool_calls == () and resp.logprobs is None
    assert resp.extra["prompt_token_ids"] == [151644, 872, 198]
    assert response_to_openai(resp) == VLLM_RESPONSE


def test_changed_logprobs_replace_stale_wire_detail() -> None:
    resp = replace(response_from_openai(OPENAI_RESPONSE), logprobs=(-9.0,))
    lps = response_to_openai(resp)["choices"][0]["logprobs"]["content"]
    assert [e["logprob"] for e in lps] == [-9.0]


def test_minimal_response_renders_a_full_completion_object() -> None:
    resp = LLMResponse(content="done", usage=Usage(3, 4), token_ids=(5, 6), logprobs=(-0.5, -0.25), cost=0.01)
    body = response_to_openai(resp)
    assert body["object"] == "chat.completion" and body["id"] == "" and isinstance(body["created"], int)
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert body[COST_KEY] == 0.01
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "done"} and choice["token_ids"] == [5, 6]
    assert [e["logprob"] for e in choice["logprobs"]["content"]] == [-0.5, -0.25]
    assert response_from_openai(body) == resp


def test_provider_total_tokens_and_more_choices_are_kept() -> None:
    body = response_to_openai(LLMResponse(content="a"))
    body["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 5}
    body["choices"].append(
        {"index": 1, "message": {"role": "assistant", "content": "b"}, "finish_reason": "stop"}
    )
    resp = response_from_openai(body)
    assert resp.usage == Usage(1, 1, extra={"total_tokens": 5}) and resp.content == "a"
    assert response_to_openai(resp) == body


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("nope", "the body must be an object, got a string"),
        ({"object": "chat.completion"}, "choices must be an array, got null"),
        ({"choices": []}, "choices is empty"),
        ({"error": {"message": "Rate limit reached", "type": "requests"}}, "error object"),
        ({"choices": [7]}, "choices[0] must be an object, got an integer"),
        ({"choices": [{"finish_reason": "stop"}]}, "choices[0].message must be an object, got null"),
        ({"choices": [{"message": {"content": 1}}]}, "choices[0].message.content must be a string"),
        ({"choices": [{"message": {"tool_calls": {}}}]}, "choices[0].message.tool_calls must be an array"),
        (
            {"choices": [{"message": {}, "logprobs": {"content": [{"logprob": "x"}]}}]},
            "choices[0].logprobs.content[0].logprob must be a number",
        ),
        ({"choices": [{"message": {}}], "usage": "lots"}, "usage must be an object"),
        ({"choices": [{"message": {}, "token_ids": [1.5]}]}, "choices[0].token_ids[0] must be an integer"),
    ],
)
def test_malformed_responses_raise(body: Any, where: str) -> None:
    assert_rejects(
        response_from_openai, body, MalformedResponseError, "malformed OpenAI chat completion response", where
    )


# --- properties -----------------------------------------------------------------------------------

_part = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}) | st.fixed_dictionaries(
    {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": TEXT})}
)
_roles = st.sampled_from(["system", "developer", "user", "assistant", "tool"])
_message = st.builds(
    Message,
    role=_roles,
    content=st.none() | TEXT | st.lists(_part, max_size=2).map(tuple),
    tool_calls=st.lists(OPENAI_TOOL_CALL, max_size=2).map(tuple),
    tool_call_id=OPT_TEXT,
    name=OPT_TEXT,
    extra=EXTRAS,
)
_request = llm_requests(
    messages=_message | st.builds(system, TEXT),
    max_messages=4,
    tools=st.dictionaries(TEXT, JSON, max_size=2),
    sampling_extra=["n", "top_k", "logprobs", "max_completion_tokens"],
)
_response = llm_responses(tool_calls=OPENAI_TOOL_CALL, finish_reasons=["stop", "length", "tool_calls"])


@settings(max_examples=300)
@given(_request)
def test_request_round_trip_property(req: LLMRequest) -> None:
    assert_value_round_trips(req, request_to_openai, request_from_openai)


@settings(max_examples=300)
@given(_response)
def test_response_round_trip_property(resp: LLMResponse) -> None:
    assert_value_round_trips(resp, response_to_openai, response_from_openai)


_wire_tool_call = optional(
    {"id": TEXT, "function": st.fixed_dictionaries({"name": TEXT, "arguments": TEXT})},
    {"type": st.sampled_from(["function", "custom"]), "index": st.integers(0, 3)},
)
_wire_message = optional(
    {"role": _roles},
    {
        "content": st.none() | TEXT | st.lists(_part, max_size=2),
        "tool_calls": st.none() | st.lists(_wire_tool_call, max_size=2),
        "tool_call_id": OPT_TEXT,
        "name": OPT_TEXT,
        "x_cache_control": JSON,
    },
)
_wire_body = optional(
    {"messages": st.lists(_wire_message, max_size=4)},
    {
        "model": OPT_TEXT,
        "tools": st.none() | st.lists(st.dictionaries(TEXT, JSON, max_size=2), max_size=2),
        "temperature": FLOAT | st.integers(0, 2),
        "top_p": FLOAT,
        "max_tokens": INT,
        "stop": st.none() | TEXT | st.lists(TEXT, max_size=2),
        "seed": INT,
        "n": JSON,
        "stream": st.booleans(),
        "response_format": JSON,
        PROMPT_TOKEN_IDS_KEY: st.none() | st.lists(st.integers(0, 9), max_size=3),
        METADATA_KEY: st.none() | st.dictionaries(TEXT, JSON, max_size=2),
        NO_SYSTEM_PROMPT_KEY: st.none() | st.booleans(),
    },
)
_wire_logprobs = st.none() | st.fixed_dictionaries(
    {
        "content": st.none()
        | st.lists(
            optional({"token": TEXT, "logprob": st.floats(max_value=0, allow_nan=False)}, {"bytes": JSON}),
            max_size=3,
        ),
        "refusal": st.none(),
    }
)
_wire_response = optional(
    {
        "id": TEXT,
        "object": st.sampled_from(["chat.completion", "chat.completion.x"]),
        "created": st.integers(0, 2**31),
        "model": TEXT,
        "choices": st.lists(
            optional(
                {
                    "index": st.integers(0, 2),
                    "message": optional(
                        {"role": st.just("assistant"), "content": OPT_TEXT},
                        {
                            "tool_calls": st.none() | st.lists(_wire_tool_call, max_size=2),
                            "refusal": OPT_TEXT,
                        },
                    ),
                    "logprobs": _wire_logprobs,
                    "finish_reason": OPT_TEXT,
                },
                {"token_ids": st.none() | st.lists(st.integers(0, 9), max_size=3), "stop_reason": JSON},
            ),
            min_size=1,
            max_size=2,
        ),
    },
    {
        "usage": st.none()
        | optional(
            {"prompt_tokens": st.integers(0, 99), "completion_tokens": st.integers(0, 99)},
            {"total_tokens": st.integers(0, 300), "prompt_tokens_details": JSON},
        ),
        "system_fingerprint": OPT_TEXT,
        COST_KEY: FLOAT,
    },
)


@settings(max_examples=300)
@given(_wire_body)
def test_request_body_round_trip_property(body: dict[str, Any]) -> None:
    assert request_to_openai(request_from_openai(body)) == body


@settings(max_examples=300)
@given(_wire_response)
def test_response_body_round_trip_property(body: dict[str, Any]) -> None:
    assert response_to_openai(response_from_openai(body)) == body
