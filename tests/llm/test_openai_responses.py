"""Round trips between ARES LLM values and the OpenAI Responses API wire format."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import Response
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
    with_reasoning,
)

from ares.errors import LLMError, MalformedResponseError
from ares.llm.openai_responses import (
    FINISH_REASON_KEY,
    NEW_MESSAGE_KEY,
    REASONING_KEY,
    TOKEN_IDS_KEY,
    reasoning_text,
    request_from_responses,
    request_to_responses,
    response_from_responses,
    response_to_responses,
    strip_extensions,
)
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage, assistant, user

# --- recorded-looking traffic -------------------------------------------------------------------

REASONING_ITEM: dict[str, Any] = {
    "type": "reasoning",
    "id": "rs_68a1",
    "summary": [{"type": "summary_text", "text": "**Inspecting the repo**"}],
    "encrypted_content": "gAAAAABoq...",
}

CODEX_BODY: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex, a coding agent.",
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<sandbox/>"}]},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Fix the failing test."},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                {"type": "input_file", "filename": "log.txt", "file_data": "data:text/plain;base64,Wg=="},
            ],
        },
        REASONING_ITEM,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_68a2",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Running the tests.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_68a3",
            "call_id": "call_A",
            "name": "shell",
            "arguments": '{"command":["pytest","-x"]}',
            "status": "completed",
        },
        {"type": "function_call", "call_id": "call_B", "name": "shell", "arguments": '{"command":["ls"]}'},
        {"type": "function_call_output", "call_id": "call_A", "output": "1 failed"},
        {"type": "function_call_output", "call_id": "call_B", "output": "a.py\nb.py"},
        {"type": "custom_tool_call", "call_id": "call_C", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_C", "output": "Done!"},
        {"type": "item_reference", "id": "msg_0001"},
        {"role": "user", "content": "Go on."},
    ],
    "tools": [
        {
            "type": "function",
            "name": "shell",
            "description": "Runs a shell command",
            "strict": False,
            "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
        },
        {"type": "custom", "name": "apply_patch", "description": "Patch files", "format": {"type": "text"}},
        {"type": "web_search"},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-session",
    "max_output_tokens": 8192,
    "temperature": 1.0,
}

RESPONSE: dict[str, Any] = {
    "id": "resp_68a4",
    "object": "response",
    "created_at": 1755000000,
    "status": "completed",
    "background": False,
    "error": None,
    "incomplete_details": None,
    "instructions": "You are Codex, a coding agent.",
    "max_output_tokens": None,
    "model": "gpt-5-2025-08-07",
    "output": [
        REASONING_ITEM,
        {
            "id": "msg_68a5",
            "type": "message",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "annotations": [],
                    "logprobs": [
                        {"token": "Run", "bytes": [82, 117, 110], "logprob": -0.01, "top_logprobs": []},
                        {"token": "ning", "bytes": [110, 105, 110, 103], "logprob": -0.5, "top_logprobs": []},
                    ],
                    "text": "Running",
                }
            ],
            "role": "assistant",
        },
        {
            "id": "fc_68a6",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"command":["pytest"]}',
            "call_id": "call_X",
            "name": "shell",
        },
        {
            "id": "fc_68a7",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"command":["git","diff"]}',
            "call_id": "call_Y",
            "name": "shell",
        },
    ],
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": "medium", "summary": "detailed"},
    "service_tier": "default",
    "store": False,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "tool_choice": "auto",
    "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": False}],
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": {
        "input_tokens": 5230,
        "input_tokens_details": {"cached_tokens": 4864},
        "output_tokens": 212,
        "output_tokens_details": {"reasoning_tokens": 128},
        "total_tokens": 5442,
    },
    "user": None,
    "metadata": {},
}


def test_codex_body_parses_into_the_shared_neutral_shapes() -> None:
    req = request_from_responses(CODEX_BODY)
    assert req.system_prompt == "You are Codex, a coding agent." and req.model == "gpt-5-codex"
    roles = [m.role for m in req.messages]
    assert roles == [
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    developer, task, turn, out_a, _, patch, patched, ref, go_on = req.messages
    assert developer.text == "<sandbox/>" and task.text == "Fix the failing test."
    assert isinstance(task.content, tuple) and task.content[1]["type"] == "input_image"
    assert turn.text == "Running the tests."
    assert turn.tool_calls == (
        ToolCall("call_A", "shell", '{"command":["pytest","-x"]}'),
        ToolCall("call_B", "shell", '{"command":["ls"]}'),
    )
    assert turn.extra[REASONING_KEY] == [REASONING_ITEM]
    assert (out_a.tool_call_id, out_a.content) == ("call_A", "1 failed")
    assert patch.tool_calls == (ToolCall("call_C", "apply_patch", "*** Begin Patch", "custom"),)
    assert patched.tool_call_id == "call_C"
    assert ref.extra["ares_item"] == {"type": "item_reference", "id": "msg_0001"}
    assert go_on == user("Go on.")
    assert req.tools[0] == {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Runs a shell command",
            "strict": False,
            "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
        },
    }
    assert req.tools[2] == {"type": "web_search", "web_search": {}}
    assert req.sampling.max_tokens == 8192 and req.sampling.extra == {"reasoning": CODEX_BODY["reasoning"]}
    assert req.extra["store"] is False and "input" not in req.extra


def test_codex_body_round_trips_exactly() -> None:
    assert request_to_responses(request_from_responses(CODEX_BODY)) == CODEX_BODY


def test_string_input_round_trips_and_reads_as_one_user_message() -> None:
    body = {"model": "gpt-4.1", "input": "Tell me a joke.", "instructions": "Be brief."}
    req = request_from_responses(body)
    assert req.messages == (user("Tell me a joke."),) and req.system_prompt == "Be brief."
    assert request_to_responses(req) == body
    changed = replace(req, messages=(user("Another."),))
    assert request_to_responses(changed)["input"] == [{"role": "user", "content": "Another."}]


def test_a_chat_shaped_request_renders_for_the_responses_api() -> None:
    tool = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    call = ToolCall("c1", "bash", "{}")
    req = LLMRequest(
        messages=(user("hi"), assistant(None, (call,)), Message("tool", "ok", tool_call_id="c1")),
        system_prompt="sys",
        tools=(tool,),
        sampling=SamplingParams(temperature=0.0, max_tokens=64),
    )
    assert request_to_responses(req) == {
        "instructions": "sys",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}],
        "temperature": 0.0,
        "max_output_tokens": 64,
    }


def test_consecutive_assistant_messages_stay_apart_through_a_marker_strip_removes() -> None:
    req = LLMRequest(messages=(assistant("a"), assistant(None, (ToolCall("c", "f", "{}"),))))
    body = request_to_responses(req)
    assert body["input"][1][NEW_MESSAGE_KEY] is True
    assert request_from_responses(body) == req
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    assert strip_extensions(body)["input"][1] == call


@pytest.mark.parametrize(
    ("req", "where"),
    [
        (LLMRequest(messages=(), tools=({"name": "f"},)), "tools[0] must have the Chat shape"),
        (LLMRequest(messages=(Message("user", "x", (ToolCall("c", "f", "{}"),)),)), "messages[0].tool_calls"),
        (LLMRequest(messages=(assistant(None, (ToolCall("c", "f", "{}", "mcp"),)),)), "tool_calls[0].type"),
    ],
)
def test_requests_the_responses_api_cannot_express_raise(req: LLMRequest, where: str) -> None:
    assert_rejects(
        request_to_responses, req, LLMError, "cannot render the request for the OpenAI Responses API", where
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ([], "the body must be an object"),
        ({"input": 3}, "input must be an array, got an integer"),
        ({"input": [7]}, "input[0] must be an object"),
        ({"input": [{"content": "x"}]}, "input[0].type must be a string, got null"),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role must be one of"),
        ({"input": [{"role": "user", "content": [1]}]}, "input[0].content[0] must be an object"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
            "input[0].arguments must be a string",
        ),
        ({"input": [{"type": "function_call_output", "call_id": 5}]}, "input[0].call_id must be a string"),
        ({"input": [], "tools": [{"name": "f"}]}, "tools[0].type must be a string, got null"),
        ({"input": [], "max_output_tokens": "many"}, "max_output_tokens must be an integer"),
        ({"input": [], "instructions": ["x"]}, "instructions must be a string or null"),
    ],
)
def test_malformed_request_bodies_raise_llm_error(body: Any, where: str) -> None:
    assert_rejects(request_from_responses, body, LLMError, "malformed OpenAI Responses request", where)


# --- responses ------------------------------------------------------------------------------------


def test_response_parses_text_calls_reasoning_logprobs_and_usage() -> None:
    resp = response_from_responses(RESPONSE)
    assert resp.id == "resp_68a4" and resp.model == "gpt-5-2025-08-07"
    assert resp.content == "Running" and resp.finish_reason == "tool_calls"
    assert [c.id for c in resp.tool_calls] == ["call_X", "call_Y"]
    assert resp.tool_calls[1] == ToolCall("call_Y", "shell", '{"command":["git","diff"]}')
    assert resp.logprobs == (-0.01, -0.5) and resp.token_ids is None
    assert resp.extra[REASONING_KEY] == [REASONING_ITEM] and reasoning_text(resp) == "**Inspecting the repo**"
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (5230, 212)
    assert resp.usage.extra["input_tokens_details"] == {"cached_tokens": 4864}
    assert resp.usage.extra["output_tokens_details"] == {"reasoning_tokens": 128}
    assert response_to_responses(resp) == RESPONSE


def test_incomplete_response_is_length_and_round_trips() -> None:
    body = {**RESPONSE, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    body["output"] = [REASONING_ITEM]
    resp = response_from_responses(body)
    assert resp.finish_reason == "length" and resp.content is None and resp.tool_calls == ()
    assert response_to_responses(resp) == body
    filtered = {**body, "incomplete_details": {"reason": "content_filter"}}
    assert response_from_responses(filtered).finish_reason == "content_filter"


def test_raw_reasoning_text_is_readable() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "2+2"}],
    }
    resp = response_from_responses({**RESPONSE, "output": [item]})
    assert reasoning_text(resp) == "2+2" and reasoning_text(LLMResponse(content="x")) is None


def test_edited_content_replaces_the_stale_wire_output() -> None:
    resp = replace(response_from_responses(RESPONSE), content="Changed", tool_calls=())
    body = response_to_responses(resp)
    assert [i["type"] for i in body["output"]] == ["reasoning", "message"]
    assert body["output"][1]["content"][0]["text"] == "Changed"


def _sdk_parses(body: dict[str, Any]) -> Response:
    return Response.model_validate(json.loads(json.dumps(body)))


def test_neutral_text_response_renders_an_object_the_sdk_accepts() -> None:
    resp = LLMResponse(content="hi")
    body = response_to_responses(resp)
    parsed = _sdk_parses(body)
    assert parsed.output_text == "hi" and parsed.status == "completed" and body["id"] == ""
    assert response_from_responses(body) == resp


def test_neutral_parallel_tool_calls_render_an_object_the_sdk_accepts() -> None:
    calls = (ToolCall("call_1", "bash", '{"cmd":"ls"}'), ToolCall("call_2", "read", '{"path":"a"}'))
    resp = LLMResponse(tool_calls=calls, finish_reason="tool_calls", usage=Usage(10, 5))
    body = response_to_responses(resp)
    parsed = _sdk_parses(body)
    assert [(c.type, c.call_id, c.name, c.arguments) for c in parsed.output] == [  # type: ignore[union-attr]
        ("function_call", "call_1", "bash", '{"cmd":"ls"}'),
        ("function_call", "call_2", "read", '{"path":"a"}'),
    ]
    assert parsed.usage is not None and parsed.usage.total_tokens == 15
    assert response_from_responses(body) == resp


def test_neutral_reasoning_logprobs_and_length_render_for_the_sdk() -> None:
    resp = LLMResponse(
        content="4",
        finish_reason="length",
        logprobs=(-0.25,),
        token_ids=(19,),
        model="m",
        id="resp_1",
        extra={REASONING_KEY: [REASONING_ITEM]},
    )
    body = response_to_responses(resp)
    parsed = _sdk_parses(body)
    assert parsed.status == "incomplete" and parsed.incomplete_details is not None
    assert parsed.incomplete_details.reason == "max_output_tokens" and body[TOKEN_IDS_KEY] == [19]
    assert parsed.output[0].type == "reasoning"
    assert response_from_responses(body) == resp


def test_finish_reasons_status_cannot_express_travel_in_an_extension_key() -> None:
    resp = LLMResponse(content="x", tool_calls=(ToolCall("c", "f", "{}"),), finish_reason="stop")
    body = response_to_responses(resp)
    assert body["status"] == "completed" and body[FINISH_REASON_KEY] == "stop"
    assert response_from_responses(body) == resp
    assert FINISH_REASON_KEY not in response_to_responses(replace(resp, finish_reason="tool_calls"))


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("nope", "the body must be an object, got a string"),
        ({"error": {"message": "Rate limit", "type": "requests"}}, "error object"),
        ({"object": "response"}, "output must be an array, got null"),
        (
            {"output": [{"type": "message", "content": [{"type": "output_text"}]}]},
            "output[0].content[0].text",
        ),
        (
            {"output": [{"type": "function_call", "call_id": "c", "name": 1}]},
            "output[0].name must be a string",
        ),
        (
            {
                "output": [
                    {"type": "message", "content": [{"type": "output_text", "text": "", "logprobs": [{}]}]}
                ]
            },
            "output[0].content[0].logprobs[0].logprob must be a number",
        ),
        ({"output": [], "usage": {"input_tokens": 1}}, "usage.output_tokens must be an integer"),
        ({"output": [], "incomplete_details": "x"}, "incomplete_details must be an object"),
        ({"output": [], TOKEN_IDS_KEY: ["a"]}, f"{TOKEN_IDS_KEY}[0] must be an integer"),
    ],
)
def test_malformed_responses_raise(body: Any, where: str) -> None:
    assert_rejects(
        response_from_responses, body, MalformedResponseError, "malformed OpenAI Responses response", where
    )


# --- properties -----------------------------------------------------------------------------------

_part = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}) | st.fixed_dictionaries(
    {"type": st.just("input_image"), "image_url": TEXT}
)
_content = st.none() | TEXT | st.lists(_part, max_size=2).map(tuple)
_reasoning_item = st.fixed_dictionaries(
    {"type": st.just("reasoning"), "id": TEXT, "summary": st.lists(JSON, max_size=2)},
    optional={"encrypted_content": TEXT},
)
_assistant_extra = with_reasoning(_reasoning_item, REASONING_KEY)
_roles = st.sampled_from(["system", "developer", "user"])
_message = st.one_of(
    st.builds(Message, _roles, _content, st.just(()), OPT_TEXT, OPT_TEXT, EXTRAS),
    st.builds(Message, st.just("tool"), _content, st.just(()), OPT_TEXT, OPT_TEXT, EXTRAS),
    st.builds(
        Message,
        st.just("assistant"),
        _content,
        st.lists(OPENAI_TOOL_CALL, max_size=2).map(tuple),
        OPT_TEXT,
        OPT_TEXT,
        _assistant_extra,
    ),
    st.builds(lambda i: Message("assistant", extra={"ares_item": {"type": "item_reference", "id": i}}), TEXT),
)
_tool = st.sampled_from(["function", "custom", "web_search"]).flatmap(
    lambda t: st.fixed_dictionaries(
        {"type": st.just(t), t: st.dictionaries(st.sampled_from(["name", "x"]), JSON)}
    )
)
_request = llm_requests(
    messages=_message, max_messages=5, tools=_tool, sampling_extra=["top_logprobs", "reasoning"]
)
_response = llm_responses(
    tool_calls=OPENAI_TOOL_CALL,
    extra=_assistant_extra,
)


@settings(max_examples=300)
@given(_request)
def test_request_round_trip_property(req: LLMRequest) -> None:
    assert_value_round_trips(req, request_to_responses, request_from_responses)


@settings(max_examples=300)
@given(_response)
def test_response_round_trip_property(resp: LLMResponse) -> None:
    assert_value_round_trips(resp, response_to_responses, response_from_responses)


_text_types = st.sampled_from(["input_text", "output_text", "text"])
_wire_part = st.one_of(
    optional({"type": _text_types, "text": TEXT}, {"annotations": JSON}),
    optional({"type": st.just("input_image"), "image_url": TEXT}, {"detail": TEXT}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": TEXT}),
)
_wire_content = TEXT | st.lists(_wire_part, max_size=2)
_ids = {"id": TEXT, "status": st.sampled_from(["completed", "incomplete"])}
_wire_call = optional(
    {"type": st.just("function_call"), "call_id": TEXT, "name": TEXT, "arguments": TEXT}, _ids
)
_wire_item = st.one_of(
    optional(
        {"role": st.sampled_from(["system", "developer", "user", "assistant"])}, {"content": _wire_content}
    ),
    optional(
        {
            "type": st.just("message"),
            "role": st.sampled_from(["user", "assistant"]),
            "content": _wire_content,
        },
        _ids,
    ),
    _reasoning_item,
    _wire_call,
    optional(
        {"type": st.just("custom_tool_call"), "call_id": TEXT, "name": TEXT, "input": TEXT}, {"id": TEXT}
    ),
    optional(
        {"type": st.sampled_from(["function_call_output", "custom_tool_call_output"]), "call_id": TEXT},
        {"output": _wire_content, "id": TEXT},
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["item_reference", "web_search_call"]), "id": TEXT}),
)
_wire_tool = st.fixed_dictionaries(
    {"type": st.sampled_from(["function", "custom", "web_search"])},
    optional={"name": TEXT, "strict": st.booleans()},
)
_wire_body = optional(
    {"input": TEXT | st.lists(_wire_item, max_size=6)},
    {
        "model": OPT_TEXT,
        "instructions": OPT_TEXT,
        "tools": st.lists(_wire_tool, max_size=2),
        "temperature": FLOAT | st.integers(0, 2),
        "top_p": FLOAT,
        "max_output_tokens": INT,
        "stream": st.booleans(),
        "reasoning": JSON,
        "store": st.booleans(),
        "x_vendor": JSON,
    },
)
_wire_logprob = optional(
    {"token": TEXT, "bytes": st.lists(st.integers(0, 255), max_size=2), "logprob": st.floats(max_value=0)},
    {"top_logprobs": st.just([])},
)
_wire_output_text = optional(
    {"type": st.just("output_text"), "text": TEXT, "annotations": st.just([])},
    {"logprobs": st.lists(_wire_logprob, max_size=2)},
)
_wire_message = optional(
    {
        "type": st.just("message"),
        "id": TEXT,
        "role": st.just("assistant"),
        "status": st.just("completed"),
        "content": st.lists(_wire_output_text | _wire_part, max_size=2),
    },
    {"phase": TEXT},
)
_wire_output_item = st.one_of(
    _reasoning_item,
    _wire_message,
    _wire_call,
    st.fixed_dictionaries({"type": st.just("web_search_call"), "id": TEXT, "status": TEXT}),
)
_wire_usage = st.fixed_dictionaries(
    {
        "input_tokens": st.integers(0, 99),
        "input_tokens_details": JSON,
        "output_tokens": st.integers(0, 99),
        "output_tokens_details": JSON,
        "total_tokens": st.integers(0, 300),
    }
)
_wire_response = optional(
    {
        "id": TEXT,
        "object": st.just("response"),
        "created_at": st.integers(0, 2**31) | st.floats(0, 2**31),
        "status": st.sampled_from(["completed", "incomplete", "in_progress", "failed", "cancelled"]),
        "error": st.none() | st.fixed_dictionaries({"code": TEXT, "message": TEXT}),
        "incomplete_details": st.none() | st.fixed_dictionaries({"reason": st.none() | TEXT}),
        "model": TEXT,
        "output": st.lists(_wire_output_item, max_size=4),
        "parallel_tool_calls": st.booleans(),
        "tool_choice": st.sampled_from(["auto", "none", "required"]),
        "tools": st.lists(_wire_tool, max_size=2),
    },
    {"usage": st.none() | _wire_usage, "temperature": FLOAT, "metadata": JSON, "ares_cost": FLOAT},
)


@settings(max_examples=300)
@given(_wire_body)
def test_request_body_round_trip_property(body: dict[str, Any]) -> None:
    assert request_to_responses(request_from_responses(body)) == body


@settings(max_examples=300)
@given(_wire_response)
def test_response_body_round_trip_property(body: dict[str, Any]) -> None:
    assert response_to_responses(response_from_responses(body)) == body
