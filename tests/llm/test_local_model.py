"""The local policy on a real GGUF model (SmolLM2-135M via xllamacpp): token ids, logprobs, limits."""

from __future__ import annotations

import asyncio
import math
import pickle
from pathlib import Path

import pytest

from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, installed_default_model

pytest.importorskip("xllamacpp", reason="needs the local extra: pip install 'ares[local]'")
if installed_default_model() is None:
    pytest.skip(f"needs the default model: {MODEL_INSTALL_COMMAND}", allow_module_level=True)

import ares
from ares.errors import LLMError, MalformedResponseError, UnknownPresetError
from ares.llm.local import ContextOverflowError, LocalChatClient
from ares.llm.local.client import aligned_logprobs
from ares.llm.local.rescore import top_logprobs
from ares.llm.openai_client import OpenAIChatClient
from ares.llm.types import LLMRequest, LLMResponse, SamplingParams, user
from ares.policies import make_policy

GREEDY = SamplingParams(temperature=0.0, max_tokens=24)


def ask(text: str, sampling: SamplingParams = GREEDY, **kw: object) -> LLMRequest:
    return LLMRequest((user(text),), system_prompt="You are terse.", sampling=sampling, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def client() -> LocalChatClient:
    return LocalChatClient(max_concurrency=2)


def assert_token_exact(resp: LLMResponse) -> None:
    assert resp.token_ids and resp.logprobs is not None
    assert len(resp.logprobs) == len(resp.token_ids) == resp.usage.completion_tokens  # type: ignore[union-attr]
    assert all(lp <= 0.0 for lp in resp.logprobs)
    assert resp.extra["ares_prompt_token_ids"] and resp.usage.prompt_tokens == len(  # type: ignore[union-attr]
        resp.extra["ares_prompt_token_ids"]
    )


async def test_greedy_answers_are_deterministic_and_token_exact(client: LocalChatClient) -> None:
    first = await client(ask("Name three colors."))
    second = await client(ask("Name three colors."))
    assert first.token_ids == second.token_ids and first.content == second.content
    assert_token_exact(first)
    assert first.model == "SmolLM2-135M-Instruct.Q4_1"
    model = await client.model()
    decoded = await model.detokenize(first.token_ids or ())
    assert decoded.removesuffix("<|im_end|>") == first.content  # an EOS token stays in token_ids


async def test_multi_byte_characters_keep_every_token_and_its_own_logprob(client: LocalChatClient) -> None:
    # llama.cpp merges the tokens of one multi-byte character (" ➞" is 3 tokens here) into a single
    # logprob entry; the answer must still carry every token, each with its own logprob.
    model = await client.model()
    arrows = tuple(await model.tokenize(" ➞" * 12))  # a raw prompt the model continues with more arrows
    request = LLMRequest((user("unused: the ids are fed"),), sampling=GREEDY, prompt_token_ids=arrows)
    resp = await client(request)
    raw = await model.complete(list(arrows), client.params(request))
    assert len(raw["completion_probabilities"]) < len(raw["tokens"])  # the merging this guards against
    assert_token_exact(resp)
    assert "➞" in resp.content and list(resp.token_ids or ()) == raw["tokens"]
    assert await model.detokenize(resp.token_ids or ()) == resp.content
    # Each logprob is the model's for that token at that position: one forced step per token agrees
    # (a token given another's logprob would be off by whole nats, as the -19 vs -0.001 that found this).
    prompt = list(resp.extra["ares_prompt_token_ids"])
    ids, logprobs = list(resp.token_ids or ()), list(resp.logprobs or ())
    for i in range(len(ids)):
        step = await model.complete(
            [*prompt, *ids[:i]],
            {"n_predict": 1, "n_probs": 64, "temperature": 0.0, "logit_bias": [[ids[i], False]]},
        )
        entries = step.get("completion_probabilities")
        if entries:  # a banned pick that is itself half a character reports nothing; skip those
            top = {int(c["id"]): float(c["logprob"]) for c in entries[0]["top_logprobs"]}
            assert top[ids[i]] == pytest.approx(logprobs[i], abs=1e-4)


#: Seeds that, at temperature 1 after this unicode prompt, sample (within 16 tokens, after a merged
#: character) a token outside the model's top 4,096: seed 1 does, at rank 9,049; the rest are spares.
FAR_SEEDS = (1, 13, 14, 15)
UNICODE_PROMPT = " ➞ → ⇒ ← 世界 你好 ✓ ★" * 3


async def test_every_token_sampled_at_temperature_1_gets_its_full_distribution_logprob() -> None:
    # 8 of 40 humaneval-single episodes once errored: a token inside a merged character was re-scored
    # against the top 4,096 of a 49,152 vocabulary only. Full prompt processing (no cache) makes
    # a seed's sample the same from call to call.
    client = LocalChatClient(temperature=1.0, max_tokens=16, sampling={"cache_prompt": False})
    model = await client.model()
    vocab = await model.vocab_size()
    prompt = tuple(await model.tokenize(UNICODE_PROMPT))
    reference_pick = (await model.tokenize("z", add_special=False))[0]  # not the re-score's forced pick
    for seed in FAR_SEEDS:
        request = LLMRequest((user("unused"),), sampling=SamplingParams(seed=seed), prompt_token_ids=prompt)
        resp = await client(request)
        assert_token_exact(resp)
        assert resp.logprobs is not None and all(math.isfinite(lp) for lp in resp.logprobs)
        raw = await model.complete(prompt, client.params(request))
        ids, reported, merged = aligned_logprobs(raw)
        assert merged and ids == list(resp.token_ids or ())
        ranks = []
        for i, lp in enumerate(reported):
            if lp is None:  # re-scored: compare with the whole distribution at that position
                full = await top_logprobs(model, [*prompt, *ids[:i]], vocab, reference_pick)
                assert len(full) == vocab
                assert math.fsum(math.exp(v) for v in full.values()) == pytest.approx(1.0, abs=1e-3)
                assert full[ids[i]] == pytest.approx(resp.logprobs[i], abs=1e-3)
                ranks.append(sum(v > full[ids[i]] for v in full.values()))
        if max(ranks) >= 4096:
            return
    pytest.fail(f"no seed of {FAR_SEEDS} sampled a token outside the top 4,096: the test's premise")


async def test_a_stop_word_after_a_multi_byte_character_is_cut_as_without_one(
    client: LocalChatClient,
) -> None:
    model = await client.model()
    ids = tuple(await model.tokenize(" ➞ a ➞ b ➞ c ➞ d"))  # continued greedily with " ➞ e ➞ f"
    stop = SamplingParams(temperature=0.0, max_tokens=24, stop=("f",))
    resp = await client(LLMRequest((user("unused"),), sampling=stop, prompt_token_ids=ids))
    assert resp.finish_reason == "stop" and "➞" in resp.content and "f" not in resp.content
    text = await model.detokenize(resp.token_ids or ())
    assert resp.content.startswith(text) and "f" not in text  # the token holding the stop word is cut
    assert resp.logprobs is not None and len(resp.logprobs) == len(resp.token_ids or ())


def test_aligning_merged_entries_marks_their_tokens_for_rescoring() -> None:
    def raw(tokens: list[int], entries: list[tuple[int, float]], stop_type: str = "eos") -> dict[str, object]:
        probs = [{"id": i, "logprob": lp} for i, lp in entries]
        return {"tokens": tokens, "completion_probabilities": probs, "stop_type": stop_type}

    exact = raw([5, 6, 7], [(5, -1.0), (6, -2.0), (7, -3.0)])
    assert aligned_logprobs(exact) == ([5, 6, 7], [-1.0, -2.0, -3.0], False)
    # 8, 9, 9 spell one character: one entry with the last token's id. From the first merge on,
    # which entry covers which token cannot be told from ids, so every later token is scored again.
    merged = raw([5, 8, 9, 9, 7], [(5, -1.0), (9, -0.1), (7, -3.0)])
    assert aligned_logprobs(merged) == ([5, 8, 9, 9, 7], [-1.0, None, None, None, None], True)
    # A stop word's tokens trail the last entry: cut, as llama.cpp cuts them from the content.
    stopped = raw([5, 6, 42], [(5, -1.0), (6, -2.0)], "word")
    assert aligned_logprobs(stopped) == ([5, 6], [-1.0, -2.0], False)
    cut_short = raw([5, 6, 42], [(5, -1.0), (6, -2.0)], "limit")
    assert aligned_logprobs(cut_short) == ([5, 6, 42], [-1.0, -2.0, None], True)
    with pytest.raises(MalformedResponseError, match="missing or bad"):
        aligned_logprobs({"tokens": [1], "stop_type": "eos"})


async def test_a_given_thread_count_is_the_servers() -> None:
    model = await LocalChatClient(threads=1).model()
    assert model.threads == 1 and model.settings.threads == 1


async def test_prompt_is_the_models_own_template(client: LocalChatClient) -> None:
    resp = await client(ask("Hi"))
    model = await client.model()
    prompt = await model.detokenize(resp.extra["ares_prompt_token_ids"])
    assert prompt.startswith("<|im_start|>system\nYou are terse.<|im_end|>")
    assert prompt.endswith("<|im_start|>assistant\n")


async def test_prompt_token_ids_are_fed_as_given(client: LocalChatClient) -> None:
    rendered = (await client(ask("Count to five."))).extra["ares_prompt_token_ids"]
    # Same ids, but the messages say something else: the ids win, nothing is rendered.
    resp = await client(ask("Ignore me entirely.", prompt_token_ids=rendered))
    assert resp.extra["ares_prompt_token_ids"] == rendered
    again = await client(ask("Count to five."))
    assert resp.token_ids == again.token_ids


async def test_max_tokens_and_stop(client: LocalChatClient) -> None:
    long = await client(
        ask("Write a long story about a dragon.", SamplingParams(temperature=0.0, max_tokens=5))
    )
    assert long.finish_reason == "length" and len(long.token_ids or ()) == 5
    assert_token_exact(long)
    unstopped = await client(
        ask("Write a long story about a dragon.", SamplingParams(temperature=0, max_tokens=24))
    )
    word = (unstopped.content or "").split()[3]
    stopped = await client(
        ask("Write a long story about a dragon.", SamplingParams(temperature=0, max_tokens=24, stop=(word,)))
    )
    assert stopped.finish_reason == "stop" and word not in (stopped.content or "")
    assert (unstopped.content or "").startswith(stopped.content or "")


async def test_client_settings_replace_the_requests() -> None:
    capped = LocalChatClient(max_tokens=3, temperature=0.0)
    resp = await capped(ask("Tell me about the sea.", SamplingParams(temperature=1.5, max_tokens=40)))
    assert resp.finish_reason == "length" and len(resp.token_ids or ()) == 3


async def test_seeded_sampling_repeats(client: LocalChatClient) -> None:
    sampled = SamplingParams(temperature=1.0, max_tokens=12, seed=7)
    a, b = await client(ask("Invent a word.", sampled)), await client(ask("Invent a word.", sampled))
    assert a.token_ids == b.token_ids
    assert_token_exact(a)


async def test_concurrency_limit_is_honoured() -> None:
    one = LocalChatClient(max_concurrency=1)
    model = await one.model()
    running, peak = 0, 0
    complete = model.complete

    async def counting(prompt: object, params: object) -> object:  # wraps the real call, counts overlap
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            return await complete(prompt, params)  # type: ignore[arg-type]
        finally:
            running -= 1

    model.complete = counting  # type: ignore[method-assign]
    try:
        answers = await asyncio.gather(
            *(one(ask(f"Say {i}.", SamplingParams(temperature=0, max_tokens=4))) for i in range(4))
        )
    finally:
        del model.complete
    assert peak == 1 and all(a.token_ids for a in answers)


async def test_context_overflow_is_a_clear_error(client: LocalChatClient) -> None:
    huge = tuple([57] * 9000)
    with pytest.raises(ContextOverflowError, match="does not fit"):
        await client(ask("x", prompt_token_ids=huge))


def test_bad_model_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="not found"):
        LocalChatClient(str(tmp_path / "missing.gguf"))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(LLMError, match="not a GGUF"):
        make_policy(f"local:{fake}")
    with pytest.raises(UnknownPresetError, match="needs a GGUF file path"):
        make_policy("local:")


async def test_policy_pickles_and_answers() -> None:
    factory = pickle.loads(pickle.dumps(make_policy("local", temperature=0.0, max_tokens=8)))
    resp = await factory(None, None).act(ask("Hello"))  # type: ignore[arg-type]
    assert_token_exact(resp)


async def test_openai_client_parses_logprobs_from_llama_cpp_server(client: LocalChatClient) -> None:
    model = await client.model()  # its loopback server speaks OpenAI's chat completions too
    async with OpenAIChatClient(base_url=f"{model.base_url}/v1", model="local", logprobs=True) as http:
        resp = await http(ask("Name a fruit."))
        plain = await OpenAIChatClient(base_url=f"{model.base_url}/v1", model="local")(ask("Name a fruit."))
    assert resp.logprobs and len(resp.logprobs) == resp.usage.completion_tokens  # type: ignore[union-attr]
    assert all(lp <= 0.0 for lp in resp.logprobs)
    assert plain.logprobs is None


async def test_humaneval_episode_runs_with_the_local_policy() -> None:
    env = ares.make("humaneval", tasks="0:1", step_limit=2)
    factory = make_policy("local", temperature=0.0, max_tokens=48)
    actions: list[LLMResponse] = []
    async with env:
        ts = await env.reset(task=0, seed=0)
        policy = factory(env.task, env.action_format)  # type: ignore[arg-type]
        while not ts.last():
            action = await policy.act(ts.observation)
            actions.append(action)
            ts = await env.step(action)
    assert actions and ts.last()
    for action in actions:
        assert_token_exact(action)
