"""Round trips between ARES LLM values and the Anthropic Messages API wire format."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_kit import (
    EXTRAS,
    FLOAT,
    INT,
    JSON,
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
from ares.llm.anthropic_messages import (
    FINISH_REASON_KEY,
    LOGPROBS_KEY,
    NEW_TURN_KEY,
    NO_USAGE_KEY,
    REASONING_KEY,
    TOKEN_IDS_KEY,
    reasoning_text,
    request_from_anthropic,
    request_to_anthropic,
    response_from_anthropic,
    response_to_anthropic,
    strip_extensions,
)
from ares.llm.openai_chat import response_from_openai, response_to_openai
from ares.llm.openai_responses import response_from_responses, response_to_responses
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage, assistant, user

# --- recorded-looking traffic -------------------------------------------------------------------

THINKING = {
    "type": "thinking",
    "thinking": "The test imports a missing helper.",
    "signature": "EqQBCkgIARAB...",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}

CLAUDE_CODE_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5-20250929",
    "max_tokens": 32000,
    "system": [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"type": "text", "text": "Be concise.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix the failing test."},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "FAILED test_x"},
                    "title": "pytest log",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                THINKING,
                REDACTED,
                {"type": "text", "text": "Let me look at both files."},
                {"type": "tool_use", "id": "toolu_01A", "name": "Read", "input": {"file_path": "/repo/a.py"}},
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "Bash",
                    "input": {"command": "pytest -x", "timeout": 60},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "def f(): ..."},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": [{"type": "text", "text": "1 failed"}],
                    "is_error": True,
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Keep going."},
            ],
        },
        {"role": "assistant", "content": "Fixed."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tools": [
        {
            "name": "Bash",
            "description": "Executes a bash command",
            "input_schema": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
                "required": ["command"],
                "additionalProperties": False,
                "$schema": "http://json-schema.org/draft-07/schema#",
            },
        },
        {"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}, "type": "custom"},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    "metadata": {"user_id": "user_abc_account__session_123"},
    "thinking": {"type": "enabled", "budget_tokens": 10000},
    "temperature": 1,
    "stop_sequences": ["</done>"],
    "stream": True,
}

MESSAGE: dict[str, Any] = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        THINKING,
        {"type": "text", "text": "Running both checks."},
        {"type": "tool_use", "id": "toolu_01C", "name": "Bash", "input": {"command": "pytest"}},
        {"type": "tool_use", "id": "toolu_01D", "name": "Bash", "input": {"command": "ruff check ."}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "cache_creation_input_tokens": 1803,
        "cache_read_input_tokens": 15210,
        "cache_creation": {"ephemeral_5m_input_tokens": 1803, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 245,
        "service_tier": "standard",
    },
}


def test_claude_code_body_parses_into_the_shared_neutral_shapes() -> None:
    req = request_from_anthropic(CLAUDE_CODE_BODY)
    assert req.system_prompt == "You are Claude Code, Anthropic's official CLI for Claude.\n\nBe concise."
    assert [m.role for m in req.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "user",
    ]
    task, turn, read, bash, keep_going, fixed, thanks = req.messages
    assert task.text == "Fix the failing test." and isinstance(task.content, tuple) and len(task.content) == 3
    assert turn.content == "Let me look at both files." and turn.extra[REASONING_KEY] == [THINKING, REDACTED]
    assert turn.tool_calls == (
        ToolCall("toolu_01A", "Read", '{"file_path":"/repo/a.py"}'),
        ToolCall("toolu_01B", "Bash", '{"command":"pytest -x","timeout":60}'),
    )
    assert (read.tool_call_id, read.content) == ("toolu_01A", "def f(): ...")
    assert bash.tool_call_id == "toolu_01B" and bash.text == "1 failed" and bash.extra["is_error"] is True
    assert keep_going.text == "Keep going." and fixed == assistant("Fixed.") and thanks == user("Thanks!")
    assert req.tools[0]["function"]["parameters"]["required"] == ["command"]
    assert req.tools[1] == {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Reads a file",
            "parameters": {"type": "object"},
            "type": "custom",
        },
    }
    assert req.tools[2] == {
        "type": "web_search_20250305",
        "web_search_20250305": {"name": "web_search", "max_uses": 5},
    }
    assert (
        req.sampling.max_tokens == 32000
        and req.sampling.stop == ("</done>",)
        and req.sampling.temperature == 1
    )
    assert req.sampling.extra == {"thinking": {"type": "enabled", "budget_tokens": 10000}}
    assert set(req.extra) == {"system", "tool_choice", "metadata", "stream"}


def test_claude_code_body_round_trips_exactly() -> None:
    assert request_to_anthropic(request_from_anthropic(CLAUDE_CODE_BODY)) == CLAUDE_CODE_BODY


def test_a_system_message_between_turns_reads_as_a_system_message_and_renders_in_place() -> None:
    """Claude Code 2.1 sends its environment notes as a ``system`` message after the first user turn."""
    notes = [{"type": "text", "text": "# Environment\n - Primary working directory: /repo"}]
    body = {
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix it."}]},
            {"role": "system", "content": notes},
        ],
    }
    req = request_from_anthropic(body)
    assert [m.role for m in req.messages] == ["user", "system"] and req.messages[1].content == tuple(notes)
    assert req.system_prompt == "You are Claude Code."
    assert request_to_anthropic(req) == body


def test_a_changed_system_prompt_replaces_the_stale_blocks() -> None:
    req = replace(request_from_anthropic(CLAUDE_CODE_BODY), system_prompt="new")
    assert request_to_anthropic(req)["system"] == "new"


def test_a_chat_shaped_request_renders_for_the_messages_api() -> None:
    tool = {
        "type": "function",
        "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}},
    }
    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}'), ToolCall("c2", "bash", "{}"))
    req = LLMRequest(
        messages=(
            user("hi"),
            assistant("Checking.", calls),
            Message("tool", "a.py", tool_call_id="c1"),
            Message("tool", "ok", tool_call_id="c2"),
            user("more"),
        ),
        system_prompt="sys",
        tools=(tool,),
        sampling=SamplingParams(max_tokens=64, stop=("X",)),
    )
    assert request_to_anthropic(req) == {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "id": "c2", "name": "bash", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "a.py"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "ok"},
                ],
            },
            {"role": "user", "content": "more"},
        ],
        "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}],
        "max_tokens": 64,
        "stop_sequences": ["X"],
    }


def test_tool_results_split_over_two_user_messages_stay_split() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "2"}]},
        ]
    }
    req = request_from_anthropic(body)
    assert [m.tool_call_id for m in req.messages] == ["a", "b"] and req.messages[1].extra == {
        NEW_TURN_KEY: True
    }
    assert request_to_anthropic(req) == body


def test_extension_keys_travel_and_strip_removes_them() -> None:
    req = LLMRequest(messages=(user("hi"),), prompt_token_ids=(1, 2), metadata={"step": 3})
    body = request_to_anthropic(req)
    assert request_from_anthropic(body) == req
    assert strip_extensions(body) == {"messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("req", "where"),
    [
        (
            LLMRequest(messages=(Message("developer", "x"),)),
            "messages[0].role 'developer' has no Anthropic form",
        ),
        (LLMRequest(messages=(assistant(None, (ToolCall("c", "f", "[1, 2]"),)),)), "tool_calls[0].arguments"),
        (LLMRequest(messages=(assistant(None, (ToolCall("c", "f", "not json"),)),)), "must be a JSON object"),
        (LLMRequest(messages=(Message("user", "x", (ToolCall("c", "f", "{}"),)),)), "messages[0].tool_calls"),
        (LLMRequest(messages=(), tools=({"name": "f"},)), "tools[0] has no Anthropic form"),
    ],
)
def test_requests_the_messages_api_cannot_express_raise(req: LLMRequest, where: str) -> None:
    assert_rejects(
        request_to_anthropic, req, LLMError, "cannot render the request for the Anthropic Messages API", where
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("x", "the body must be an object"),
        ({}, "messages must be an array, got null"),
        (
            {"messages": [{"role": "developer", "content": "x"}]},
            "messages[0].role must be 'user', 'assistant' or 'system'",
        ),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content must be an array"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": []}],
                    }
                ]
            },
            "messages[0].content[0].input must be an object, got an array",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 1}]}]},
            "messages[0].content[0].tool_use_id must be a string",
        ),
        ({"messages": [], "system": [{"type": "text"}]}, "system[0].text must be a string, got null"),
        ({"messages": [], "stop_sequences": "x"}, "stop_sequences must be an array"),
        ({"messages": [], "tools": [{"name": "f", "parameters": {}}]}, "tools[0] is not an Anthropic tool"),
    ],
)
def test_malformed_request_bodies_raise_llm_error(body: Any, where: str) -> None:
    assert_rejects(request_from_anthropic, body, LLMError, "malformed Anthropic Messages request", where)


# --- responses ------------------------------------------------------------------------------------


def test_message_parses_text_calls_thinking_stop_reason_and_usage() -> None:
    resp = response_from_anthropic(MESSAGE)
    assert resp.id == "msg_01XFDUDYJgAACzvnptvVoYEL" and resp.model == "claude-sonnet-4-5-20250929"
    assert resp.content == "Running both checks." and resp.finish_reason == "tool_calls"
    assert resp.tool_calls == (
        ToolCall("toolu_01C", "Bash", '{"command":"pytest"}'),
        ToolCall("toolu_01D", "Bash", '{"command":"ruff check ."}'),
    )
    assert resp.extra[REASONING_KEY] == [THINKING] and reasoning_text(resp) == THINKING["thinking"]
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (12, 245)
    assert resp.usage.extra["cache_read_input_tokens"] == 15210
    assert resp.usage.extra["cache_creation_input_tokens"] == 1803
    assert resp.token_ids is None and resp.logprobs is None
    assert response_to_anthropic(resp) == MESSAGE


@pytest.mark.parametrize(
    ("stop_reason", "stop_sequence", "finish"),
    [
        ("end_turn", None, "stop"),
        ("stop_sequence", "</done>", "stop"),
        ("max_tokens", None, "length"),
        ("tool_use", None, "tool_calls"),
        ("refusal", None, "content_filter"),
        ("pause_turn", None, "pause_turn"),
        ("model_context_window_exceeded", None, "length"),
        (None, None, None),
    ],
)
def test_stop_reasons_map_to_finish_reasons_and_round_trip(
    stop_reason: str | None, stop_sequence: str | None, finish: str | None
) -> None:
    body = {**MESSAGE, "content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason}
    body["stop_sequence"] = stop_sequence
    resp = response_from_anthropic(body)
    assert resp.finish_reason == finish
    assert response_to_anthropic(resp) == body


def test_edited_content_replaces_the_stale_wire_blocks() -> None:
    body = {
        **MESSAGE,
        "content": [{"type": "text", "text": "a", "citations": None}, {"type": "text", "text": "b"}],
    }
    resp = response_from_anthropic(body)
    assert resp.content == "ab" and response_to_anthropic(resp) == body
    assert response_to_anthropic(replace(resp, content="c"))["content"] == [{"type": "text", "text": "c"}]


def _sdk_parses(body: dict[str, Any]) -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(json.loads(json.dumps(body)))


def test_neutral_text_response_renders_a_message_the_sdk_accepts() -> None:
    resp = LLMResponse(content="hi")
    body = response_to_anthropic(resp)
    parsed = _sdk_parses(body)
    assert parsed.content[0].type == "text" and parsed.content[0].text == "hi"
    assert parsed.stop_reason == "end_turn" and body[NO_USAGE_KEY] is True
    assert response_from_anthropic(body) == resp


def test_neutral_parallel_tool_calls_render_a_message_the_sdk_accepts() -> None:
    calls = (ToolCall("toolu_1", "bash", '{"cmd": "ls"}'), ToolCall("toolu_2", "read", '{"path":"a"}'))
    resp = LLMResponse(tool_calls=calls, finish_reason="tool_calls", usage=Usage(10, 5))
    body = response_to_anthropic(resp)
    parsed = _sdk_parses(body)
    assert [(b.type, b.id, b.input) for b in parsed.content] == [  # type: ignore[union-attr]
        ("tool_use", "toolu_1", {"cmd": "ls"}),
        ("tool_use", "toolu_2", {"path": "a"}),
    ]
    assert parsed.stop_reason == "tool_use" and parsed.usage.input_tokens == 10
    back = response_from_anthropic(body)
    assert back.tool_calls[0].arguments == '{"cmd":"ls"}'  # compact JSON: the wire holds an object
    assert back == replace(resp, tool_calls=(replace(calls[0], arguments='{"cmd":"ls"}'), calls[1]))


def test_neutral_thinking_token_ids_and_logprobs_render_for_the_sdk() -> None:
    resp = LLMResponse(
        content="4",
        token_ids=(19, 2),
        logprobs=(-0.1, -0.2),
        finish_reason="length",
        usage=Usage(3, 2),
        extra={REASONING_KEY: [THINKING, REDACTED]},
    )
    body = response_to_anthropic(resp)
    parsed = _sdk_parses(body)
    assert [b.type for b in parsed.content] == ["thinking", "redacted_thinking", "text"]
    assert (
        parsed.stop_reason == "max_tokens"
        and body[TOKEN_IDS_KEY] == [19, 2]
        and body[LOGPROBS_KEY] == [-0.1, -0.2]
    )
    assert response_from_anthropic(body) == resp


def test_finish_reasons_stop_reason_cannot_express_travel_in_an_extension_key() -> None:
    resp = LLMResponse(tool_calls=(ToolCall("c", "f", "{}"),), finish_reason="function_call")
    body = response_to_anthropic(resp)
    assert body["stop_reason"] == "tool_use" and body[FINISH_REASON_KEY] == "function_call"
    assert response_from_anthropic(body) == resp


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("c", "f", "[1]"),
        ToolCall("c", "f", ""),
        ToolCall("c", "f", '"s"'),
        ToolCall("c", "f", "{}", "custom"),
    ],
)
def test_tool_calls_without_an_object_input_do_not_render(call: ToolCall) -> None:
    with pytest.raises(MalformedResponseError, match=r"cannot render .* tool_calls\[0\]"):
        response_to_anthropic(LLMResponse(tool_calls=(call,), finish_reason="tool_calls"))


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (None, "the body must be an object, got null"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error object"),
        ({"type": "message"}, "content must be an array, got null"),
        ({"content": [{"type": "text"}]}, "content[0].text must be a string, got null"),
        (
            {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]},
            "content[0].input must be an object",
        ),
        ({"content": [], "usage": None}, "usage must be an object, got null"),
        (
            {"content": [], "usage": {"input_tokens": 1, "output_tokens": "2"}},
            "usage.output_tokens must be an integer",
        ),
        (
            {"content": [], "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": "x"}},
            "usage.cache_read_input_tokens must be an integer",
        ),
        ({"content": [], "stop_reason": 3}, "stop_reason must be a string"),
    ],
)
def test_malformed_responses_raise(body: Any, where: str) -> None:
    assert_rejects(
        response_from_anthropic, body, MalformedResponseError, "malformed Anthropic Messages response", where
    )


# --- cross-dialect --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resp",
    [
        LLMResponse(content="The answer is 4."),
        LLMResponse(
            content="Checking.",
            tool_calls=(
                ToolCall("call_1", "bash", '{"cmd":"ls"}'),
                ToolCall("call_2", "read", '{"path":"a.py"}'),
            ),
            finish_reason="tool_calls",
            usage=Usage(120, 30),
        ),
        LLMResponse(content=None, tool_calls=(ToolCall("c", "f", "{}"),), finish_reason="tool_calls"),
        LLMResponse(content="cut", finish_reason="length", usage=Usage(5, 1)),
    ],
)
def test_one_neutral_response_reads_back_the_same_in_every_dialect(resp: LLMResponse) -> None:
    pairs = [
        (response_to_openai, response_from_openai),
        (response_to_responses, response_from_responses),
        (response_to_anthropic, response_from_anthropic),
    ]
    for render, parse in pairs:
        back = parse(json.loads(json.dumps(render(resp))))
        assert (back.content, back.tool_calls, back.finish_reason, back.usage) == (
            resp.content,
            resp.tool_calls,
            resp.finish_reason,
            resp.usage,
        ), render.__module__


# --- properties -----------------------------------------------------------------------------------

_json_object = st.dictionaries(TEXT, JSON, max_size=3)
_compact = _json_object.map(lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")))
_call = st.builds(ToolCall, TEXT, TEXT, _compact)
_calls = st.lists(_call, max_size=2).map(tuple)
_block = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}) | st.fixed_dictionaries(
    {"type": st.just("image"), "source": st.fixed_dictionaries({"type": st.just("url"), "url": TEXT})}
)
_blocks = st.lists(_block, max_size=2).map(tuple)
_thinking = st.fixed_dictionaries({"type": st.just("thinking"), "thinking": TEXT, "signature": TEXT})
_thinking |= st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": TEXT})
_assistant_extra = with_reasoning(_thinking, REASONING_KEY)
_message = st.one_of(
    st.builds(Message, st.just("user"), TEXT | _blocks, st.just(()), OPT_TEXT, OPT_TEXT, EXTRAS),
    st.builds(Message, st.just("tool"), st.none() | TEXT | _blocks, st.just(()), OPT_TEXT, OPT_TEXT, EXTRAS),
    st.builds(Message, st.just("assistant"), OPT_TEXT, _calls, OPT_TEXT, OPT_TEXT, _assistant_extra),
    st.builds(Message, st.just("system"), TEXT | _blocks, st.just(()), OPT_TEXT, OPT_TEXT, EXTRAS),
)
_tool = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.dictionaries(st.sampled_from(["name", "parameters", "x"]), JSON),
    }
) | st.fixed_dictionaries(
    {"type": st.just("bash_20250124"), "bash_20250124": st.fixed_dictionaries({"name": TEXT})}
)
_request = llm_requests(messages=_message, max_messages=5, tools=_tool, sampling_extra=["top_k", "thinking"])
_response = llm_responses(
    tool_calls=_call,
    extra=_assistant_extra,
)


@settings(max_examples=300)
@given(_request)
def test_request_round_trip_property(req: LLMRequest) -> None:
    assert_value_round_trips(req, request_to_anthropic, request_from_anthropic)


@settings(max_examples=300)
@given(_response)
def test_response_round_trip_property(resp: LLMResponse) -> None:
    assert_value_round_trips(resp, response_to_anthropic, response_from_anthropic)


_wire_text = optional({"type": st.just("text"), "text": TEXT}, {"citations": st.none() | st.just([])})
_wire_tool_use = optional(
    {"type": st.just("tool_use"), "id": TEXT, "name": TEXT, "input": _json_object}, {"caller": JSON}
)
_wire_result = optional(
    {"type": st.just("tool_result"), "tool_use_id": TEXT},
    {
        "content": TEXT | st.lists(_block, max_size=2),
        "is_error": st.booleans(),
        "cache_control": st.just({"type": "ephemeral"}),
    },
)
_wire_assistant_block = st.one_of(
    _wire_text,
    _wire_tool_use,
    _thinking,
    st.fixed_dictionaries({"type": st.just("server_tool_use"), "id": TEXT}),
)
_wire_message = st.one_of(
    optional(
        {"role": st.just("user"), "content": TEXT | st.lists(_wire_result | _block, max_size=4)},
        {"x_k": JSON},
    ),
    optional(
        {"role": st.just("assistant"), "content": TEXT | st.lists(_wire_assistant_block, max_size=4)}, {}
    ),
    optional({"role": st.just("system"), "content": TEXT | st.lists(_block, max_size=2)}, {"x_k": JSON}),
)
_wire_tool = st.one_of(
    optional({"name": TEXT, "input_schema": _json_object}, {"description": TEXT, "type": st.just("custom")}),
    optional({"type": st.just("web_search_20250305"), "name": TEXT}, {"max_uses": st.integers(1, 9)}),
)
_wire_body = optional(
    {"messages": st.lists(_wire_message, max_size=5)},
    {
        "model": OPT_TEXT,
        "max_tokens": INT,
        "system": TEXT | st.lists(optional({"type": st.just("text"), "text": TEXT}, {"cache_control": JSON})),
        "tools": st.lists(_wire_tool, max_size=2),
        "temperature": FLOAT | st.integers(0, 1),
        "top_p": FLOAT,
        "top_k": INT,
        "stop_sequences": st.lists(TEXT, max_size=2),
        "thinking": JSON,
        "stream": st.booleans(),
        "metadata": JSON,
    },
)
_wire_response = optional(
    {
        "id": TEXT,
        "type": st.just("message"),
        "role": st.just("assistant"),
        "model": TEXT,
        "content": st.lists(_wire_assistant_block, max_size=4),
        "stop_reason": st.none()
        | st.sampled_from(["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]),
        "stop_sequence": OPT_TEXT,
        "usage": optional(
            {"input_tokens": st.integers(0, 99), "output_tokens": st.integers(0, 99)},
            {
                "cache_creation_input_tokens": st.none() | st.integers(0, 99),
                "cache_read_input_tokens": st.none() | st.integers(0, 99),
                "service_tier": TEXT,
            },
        ),
    },
    {"container": JSON, "ares_cost": FLOAT, "x_vendor": JSON},
)


@settings(max_examples=300)
@given(_wire_body)
def test_request_body_round_trip_property(body: dict[str, Any]) -> None:
    assert request_to_anthropic(request_from_anthropic(body)) == body


@settings(max_examples=300)
@given(_wire_response)
def test_response_body_round_trip_property(body: dict[str, Any]) -> None:
    assert response_to_anthropic(response_from_anthropic(body)) == body
