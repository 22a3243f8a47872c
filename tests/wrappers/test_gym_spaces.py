"""The LLM spaces behave like gymnasium spaces: membership, seeded sampling, equality, batching, JSON."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from gymnasium.spaces import Sequence, Space, Tuple
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage
from ares.wrappers.gym.spaces import (
    ChatMessagesSpace,
    LLMRequestSpace,
    LLMResponseSpace,
    TextSpace,
    token_ids_space,
)

CALL = ToolCall(id="call_1", name="bash", arguments='{"cmd": "ls"}')
REQUEST = LLMRequest(
    messages=(
        Message("user", "fix the bug"),
        Message("assistant", None, (CALL,)),
        Message("tool", "file.py", tool_call_id="call_1"),
        Message("user", ({"type": "text", "text": "and run the tests"},)),
    ),
    system_prompt="You are a careful engineer.",
    tools=({"type": "function", "function": {"name": "bash"}},),
    sampling=SamplingParams(temperature=0.7, top_p=0.9, max_tokens=256, stop=("</s>",)),
    prompt_token_ids=(1, 2, 3),
)
RESPONSE = LLMResponse(
    content="Let me look.",
    tool_calls=(CALL,),
    usage=Usage(10, 3),
    token_ids=(5, 6, 7),
    logprobs=(-0.1, -2.0, 0.0),
)


def all_spaces() -> list[Space]:
    return [LLMRequestSpace(), LLMResponseSpace(), ChatMessagesSpace(), TextSpace(), token_ids_space(100)]


@pytest.mark.parametrize(
    "request_",
    [
        REQUEST,
        LLMRequest(messages=(), system_prompt="only a system prompt"),
        LLMRequest(messages=(Message("developer", "be brief"), Message("user", "hi"))),
    ],
)
def test_well_formed_requests_are_members(request_: LLMRequest) -> None:
    assert request_ in LLMRequestSpace()


@pytest.mark.parametrize(
    "bad",
    [
        LLMRequest(messages=()),  # nothing to answer
        LLMRequest(messages=(Message("robot", "hi"),)),  # type: ignore[arg-type]
        LLMRequest(messages=(Message("user", 42),)),  # type: ignore[arg-type]
        LLMRequest(messages=(Message("user", "hi", (CALL,)),)),  # only the assistant calls tools
        LLMRequest(messages=(Message("tool", "output"),)),  # a tool reply needs its call id
        LLMRequest(messages=[Message("user", "hi")]),  # type: ignore[arg-type]
        LLMRequest(messages=(Message("user", "hi"),), prompt_token_ids=(1, -2)),
        LLMRequest(messages=(Message("user", "hi"),), prompt_token_ids=(True,)),
        LLMRequest(messages=(Message("user", "hi"),), sampling=SamplingParams(temperature=-1.0)),
        LLMRequest(messages=(Message("user", "hi"),), sampling=SamplingParams(top_p=float("nan"))),
        LLMRequest(messages=(Message("user", "hi"),), system_prompt=3),  # type: ignore[arg-type]
        RESPONSE,
        "hi",
        None,
    ],
)
def test_malformed_requests_are_not_members(bad: object) -> None:
    assert bad not in LLMRequestSpace()


def test_response_membership() -> None:
    space = LLMResponseSpace()
    assert RESPONSE in space
    assert LLMResponse() in space  # an empty reply (e.g. filtered) is still a response
    assert LLMResponse(content=5) not in space  # type: ignore[arg-type]
    assert LLMResponse(content="x", token_ids=(1, 2), logprobs=(-0.5,)) not in space  # one logprob per id
    assert LLMResponse(content="x", usage=Usage(-1, 0)) not in space
    assert LLMResponse(content="x", cost=-1.0) not in space
    assert LLMResponse(content="x", tool_calls=(ToolCall("id", "f", {"a": 1}),)) not in space  # type: ignore[arg-type]
    assert REQUEST not in space


def test_chat_messages_membership_checks_roles_and_content_types() -> None:
    space = ChatMessagesSpace()
    wire = request_to_openai(REQUEST)["messages"]
    assert wire in space
    assert [{"role": "user", "content": "hi"}] in space
    assert [] not in space
    assert ({"role": "user", "content": "hi"},) not in space  # a list, as OpenAI clients send it
    assert [{"role": "narrator", "content": "hi"}] not in space
    assert [{"role": "user", "content": 7}] not in space
    assert [{"role": "user", "content": None}] not in space  # only the assistant may omit content
    assert [{"role": "assistant", "content": None}] in space
    assert [{"role": "user", "content": [{"type": "text", "text": 1}]}] not in space
    assert [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}] in space
    assert [{"role": "tool", "content": "out"}] not in space
    assert [{"role": "user", "content": "hi", "tool_calls": []}] not in space
    bad_call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
    assert [{"role": "assistant", "content": None, "tool_calls": [bad_call]}] not in space


def test_token_and_text_membership() -> None:
    tokens = token_ids_space(10)
    assert np.array([0, 9, 3], dtype=np.int64) in tokens
    assert np.array([], dtype=np.int64) in tokens
    assert np.array([10]) not in tokens
    assert np.array([-1]) not in tokens
    text = TextSpace()
    assert "```bash\nls\n```" in text and "ünïcode" in text
    assert b"bytes" not in text and 3 not in text


@pytest.mark.parametrize("space", all_spaces(), ids=repr)
def test_samples_are_members_and_seeding_is_deterministic(space: Space) -> None:
    space.seed(7)
    first = [space.sample() for _ in range(20)]
    assert all(s in space for s in first)
    space.seed(7)
    again = [space.sample() for _ in range(20)]
    assert [_key(s) for s in first] == [_key(s) for s in again]
    space.seed(8)
    other = [space.sample() for _ in range(20)]
    assert [_key(s) for s in first] != [_key(s) for s in other]


@pytest.mark.parametrize("space", all_spaces(), ids=repr)
def test_spaces_compare_copy_and_pickle(space: Space) -> None:
    twin = copy.deepcopy(space)
    assert twin == space and repr(twin) == repr(space)
    assert pickle.loads(pickle.dumps(space)) == space
    assert space != TextSpace(max_length=3)
    assert LLMRequestSpace(max_messages=2) != LLMRequestSpace(max_messages=3)
    assert repr(LLMRequestSpace()) == "LLMRequestSpace(max_messages=6, max_length=120)"


@pytest.mark.parametrize("space", all_spaces(), ids=repr)
def test_batch_space_and_vector_helpers_accept_the_spaces(space: Space) -> None:
    space.seed(3)
    batched = batch_space(space, 4)
    assert isinstance(batched, Tuple) and len(batched.spaces) == 4
    assert all(sub == space for sub in batched.spaces)
    sample = batched.sample()
    assert sample in batched
    # The batch's sub-spaces are seeded apart from each other and reproducibly from the source space.
    assert len({_key(s) for s in sample}) > 1
    space.seed(3)
    assert [_key(s) for s in batch_space(space, 4).sample()] == [_key(s) for s in sample]
    # What a vector env does with one observation per sub-env, and back.
    joined = concatenate(space, list(sample), create_empty_array(space, 4))
    assert joined in batched
    assert [_key(s) for s in iterate(batched, joined)] == [_key(s) for s in sample]


def test_json_round_trip_uses_the_openai_wire_format() -> None:
    requests, responses = LLMRequestSpace(), LLMResponseSpace()
    assert requests.from_jsonable(requests.to_jsonable([REQUEST])) == [REQUEST]
    assert responses.from_jsonable(responses.to_jsonable([RESPONSE])) == [RESPONSE]
    assert requests.to_jsonable([REQUEST])[0]["messages"][0] == {
        "role": "system",
        "content": REQUEST.system_prompt,
    }


def test_masks_and_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="masks"):
        LLMRequestSpace().sample(mask=np.ones(3, dtype=np.int8))
    with pytest.raises(ValueError, match="max_messages"):
        LLMRequestSpace(max_messages=0)
    with pytest.raises(ValueError, match="vocab_size"):
        token_ids_space(0)
    assert isinstance(token_ids_space(5), Sequence)


def _key(sample: object) -> object:
    """A hashable, comparable stand-in for a sample (arrays, dicts and LLM values are not hashable)."""
    if isinstance(sample, np.ndarray):
        return ("array", tuple(sample.tolist()))
    if isinstance(sample, tuple) and not hasattr(sample, "_fields"):
        return tuple(_key(s) for s in sample)
    return repr(sample)
