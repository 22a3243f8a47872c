"""Episodes as token sequences: what a policy-gradient trainer computes its loss on.

A multi-turn episode whose prompts extend each other token for token (the local policy, or any
policy behind a ``TokenExactClient``) is one sequence: the first prompt, then every completion and
every token the environment and template added in between. ``mask`` marks the tokens the policy
sampled (1) apart from the rest (0), and ``logprobs`` holds the policy's logprob of each sampled
token (0.0 under mask 0). Where a prompt does not extend the previous prompt + completion (an agent
rewrote its history), a new sequence starts, so no token is ever scored in a context the policy
did not see. An agent that compacted its context (``ares.agents.context``) starts a new sequence at
the first request after its summary, and ``strict=True`` allows no other split: every sequence then
extends its own first prompt exactly, turn by turn. That is the shape TRL (``env_mask``), SkyRL
(``loss_masks``) and verl (``response_mask``) train on; a single-turn episode is simply prompt +
completion, mask all ones.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ares.envs.blame import masked
from ares.errors import AresError
from ares.llm._wire import PROMPT_TOKEN_IDS_KEY
from ares.llm.context_marks import CONTEXT_KEY
from ares.llm.token_versions import answer_segments
from ares.records.exports.turns import Turn, episode_fact, episode_reward, turns
from ares.records.model import EpisodeRecord

#: Episode statuses that come with a reward a trainer may use (the others ended without a verdict).
SCORED = frozenset({"finished", "truncated"})


#: Why a sequence starts: the episode's first turn, the first turn after a compaction, or a prompt
#: that does not extend the previous prompt + completion (a history rewritten other than by compaction).
SequenceStart = Literal["episode", "compaction", "reset"]


class MissingTokensError(AresError, ValueError):
    """A turn has no token ids: the policy worked in text, so there is nothing exact to train on."""


class PrefixError(AresError, ValueError):
    """A prompt that does not extend its sequence where no compaction explains a new one (``strict``)."""


@dataclass(frozen=True, slots=True)
class TurnCall:
    """One policy turn of a sequence: its completion tokens ``[start, end)`` in ``completion_ids``,
    the version that answered and the one serving when it was asked, and its clock (wall time;
    ``queue_s``: how long the prompt waited before the policy took it). The clock and
    ``requested_version`` are None where the runner recorded no call (``StepRecord.call``)."""

    start: int
    end: int
    policy_version: int | None = None
    requested_version: int | None = None
    requested_at: float | None = None
    answered_at: float | None = None
    queue_s: float | None = None

    @classmethod
    def of(cls, turn: Turn, start: int, end: int) -> TurnCall:
        call = turn.step.call
        version = turn.response.policy_version
        if call is None:
            return cls(start, end, version)
        return cls(
            start, end, version, call.requested_version, call.requested_at, call.answered_at, call.queue_s
        )


@dataclass(frozen=True, slots=True)
class TokenSequence:
    """One training sample: a prompt, what followed it, and which of those tokens the policy chose.

    ``reward`` is the episode's reward, None unless it finished or was truncated (an errored or
    cancelled episode has no score: a trainer should drop it rather than read it as a failure).
    ``index`` and ``group_id`` are the runner's episode number and group (None outside a runner).
    ``first_turn`` and ``start`` say where in the episode the sequence begins and why.
    """

    episode_id: str
    task_id: str | None
    index: int | None
    group_id: str | None
    status: str
    reward: float | None
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    mask: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    turns: int
    #: The episode turn this sequence begins at, and why it begins there.
    first_turn: int = 0
    start: SequenceStart = "episode"
    #: The verifier's pass/fail apart from the (possibly shaped) reward; None without a verdict.
    outcome: bool | None = None
    #: Who is to blame when the episode did not simply finish (``ares.envs.blame``), and whether
    #: the whole sample is to be left out for it (infra and task faults: not the policy's doing).
    blame: str | None = None
    masked: bool = False
    #: Which weights made which tokens: ``(start, end, version)`` over ``completion_ids`` (end
    #: exclusive; observation tokens between two answers of one version stay in its segment), in
    #: order; the version is the answer's ``policy_version`` (None: not reported), or per token for
    #: an answer continued across a weight update (``ares.llm.token_versions``).
    version_segments: tuple[tuple[int, int, int | None], ...] = ()
    #: Each policy turn's tokens, versions and timing (``TurnCall``), in order: how stale each
    #: answer was when it was asked and how long it queued, for a trainer's staleness bound.
    turn_calls: tuple[TurnCall, ...] = ()

    def __post_init__(self) -> None:
        if len(self.mask) != len(self.completion_ids):
            raise ValueError("mask and completion_ids differ in length")
        if self.logprobs is not None and len(self.logprobs) != len(self.completion_ids):
            raise ValueError("logprobs and completion_ids differ in length")

    @property
    def trainable(self) -> bool:
        """Whether a trainer learns from this sample: it has a reward and is not masked."""
        return self.reward is not None and not self.masked

    @property
    def oldest_version(self) -> int | None:
        """The oldest version that answered any turn (what a staleness bound judges); None if none
        reported one."""
        versions = [v for _, _, v in self.version_segments if v is not None]
        return min(versions) if versions else None

    def token_versions(self) -> tuple[int | None, ...]:
        """One entry per ``completion_ids`` token: the version that sampled it, None for the
        environment's tokens (mask 0) and where no version was reported."""
        versions: list[int | None] = [None] * len(self.completion_ids)
        for start, end, version in self.version_segments:
            for i in range(start, end):
                if self.mask[i]:
                    versions[i] = version
        return tuple(versions)

    @property
    def sampled_tokens(self) -> int:
        """How many completion tokens the policy sampled (the ones a loss scores)."""
        return sum(self.mask)


#: The fields of a ``TokenSequence``, in order: the keys of a ``sequences`` JSONL row.
SEQUENCE_FIELDS = tuple(f.name for f in dataclasses.fields(TokenSequence))


def token_sequences(episode: EpisodeRecord, *, strict: bool = False) -> list[TokenSequence]:
    """The episode's policy turns joined into as few exact sequences as the prompts allow; a
    compaction always starts a new one.

    Raises ``MissingTokensError`` when a turn lacks prompt or completion token ids, and with
    ``strict`` ``PrefixError`` when a prompt neither extends its sequence nor follows a compaction.
    """
    reward = episode_reward(episode) if episode.status in SCORED else None
    blame, outcome = episode_fact(episode, "blame"), episode_fact(episode, "outcome")
    is_masked = masked(blame) if blame is not None else episode.status not in SCORED
    metadata = episode.metadata if isinstance(episode.metadata, Mapping) else {}
    index = metadata.get("episode_index")
    group = metadata.get("group_id")
    chains: list[_Chain] = []
    for turn in turns(episode):
        prompt, completion, logprobs = _turn_tokens(episode, turn)
        current = chains[-1] if chains else None
        compacted = turn.prompt is not None and turn.prompt.metadata.get(CONTEXT_KEY) == "compacted"
        if current is None:
            chains.append(_Chain(prompt, completion, logprobs, turn.index, "episode", turn))
        elif compacted:
            chains.append(_Chain(prompt, completion, logprobs, turn.index, "compaction", turn))
        elif current.extends_into(prompt):
            current.add(prompt, completion, logprobs, turn)
        elif strict:
            raise PrefixError(
                f"episode {episode.episode_id} turn {turn.index}: the prompt does not extend the previous "
                "prompt + completion and follows no compaction"
            )
        else:
            chains.append(_Chain(prompt, completion, logprobs, turn.index, "reset", turn))
    return [
        TokenSequence(
            episode_id=episode.episode_id,
            task_id=episode.task_id,
            index=int(index) if isinstance(index, int) else None,
            group_id=str(group) if group is not None else None,
            status=episode.status,
            reward=reward,
            prompt_ids=tuple(c.prompt),
            completion_ids=tuple(c.completion),
            mask=tuple(c.mask),
            logprobs=None if c.logprobs is None else tuple(c.logprobs),
            turns=c.turns,
            first_turn=c.first_turn,
            start=c.start,
            outcome=outcome if isinstance(outcome, bool) else None,
            blame=str(blame) if blame is not None else None,
            masked=is_masked,
            version_segments=tuple((start, end, v) for start, end, v in c.segments),
            turn_calls=tuple(c.calls),
        )
        for c in chains
    ]


def episode_sequences(episodes: Iterable[EpisodeRecord], *, strict: bool = False) -> list[TokenSequence]:
    """``token_sequences`` of each episode, in order."""
    return [s for episode in episodes for s in token_sequences(episode, strict=strict)]


class _Chain:
    """A sequence being built: the first prompt, then completions and the tokens between them."""

    def __init__(
        self,
        prompt: Sequence[int],
        completion: Sequence[int],
        logprobs: Sequence[float] | None,
        first_turn: int,
        start: SequenceStart,
        turn: Turn,
    ) -> None:
        self.first_turn, self.start = first_turn, start
        self.prompt = list(prompt)
        self.completion = list(completion)
        self.mask = [1] * len(completion)
        self.logprobs = None if logprobs is None else list(logprobs)
        self.turns = 1
        self.segments: list[list[Any]] = [list(segment) for segment in answer_segments(turn.response)]
        self.calls = [TurnCall.of(turn, 0, len(completion))]

    def extends_into(self, prompt: Sequence[int]) -> bool:
        """Whether ``prompt`` starts with everything so far (so the policy saw it exactly)."""
        n, head = len(self.prompt), len(self.prompt) + len(self.completion)
        if len(prompt) < head:
            return False
        return list(prompt[:n]) == self.prompt and list(prompt[n:head]) == self.completion

    def add(
        self,
        prompt: Sequence[int],
        completion: Sequence[int],
        logprobs: Sequence[float] | None,
        turn: Turn,
    ) -> None:
        added = list(prompt[len(self.prompt) + len(self.completion) :])
        at = len(self.completion) + len(added)
        self.calls.append(TurnCall.of(turn, at, at + len(completion)))
        for start, end, version in answer_segments(turn.response):  # its own spans, shifted to `at`
            if self.segments and self.segments[-1][2] == version:
                self.segments[-1][1] = at + end  # the tokens in between stay in the segment
            else:
                self.segments.append([at + start, at + end, version])
        self.completion += added + list(completion)
        self.mask += [0] * len(added) + [1] * len(completion)
        if self.logprobs is not None and logprobs is not None:
            self.logprobs += [0.0] * len(added) + list(logprobs)
        else:
            self.logprobs = None
        self.turns += 1


def _turn_tokens(episode: EpisodeRecord, turn: Turn) -> tuple[list[int], list[int], list[float] | None]:
    """(prompt ids the policy was fed, completion ids, logprobs) of one turn."""
    response = turn.response
    fed: Any = response.extra.get(PROMPT_TOKEN_IDS_KEY) if isinstance(response.extra, Mapping) else None
    prompt = fed if fed is not None else (turn.prompt.prompt_token_ids if turn.prompt is not None else None)
    if not prompt or response.token_ids is None:
        what = "prompt" if not prompt else "completion"
        raise MissingTokensError(
            f"episode {episode.episode_id} turn {turn.index} has no {what} token ids: sample with a "
            "token-level policy (--policy local, TransformersPolicy) or give the environment a "
            "token_renderer"
        )
    logprobs = None if response.logprobs is None else [float(x) for x in response.logprobs]
    if logprobs is not None and len(logprobs) != len(response.token_ids):
        raise MissingTokensError(
            f"episode {episode.episode_id} turn {turn.index}: {len(logprobs)} logprobs for "
            f"{len(response.token_ids)} tokens"
        )
    return [int(t) for t in prompt], [int(t) for t in response.token_ids], logprobs


# --- JSONL: ``ares export --format sequences`` --------------------------------------------------------


def sequence_row(sequence: TokenSequence) -> dict[str, Any]:
    """A sequence as a plain JSON object (lists for the token fields)."""
    row = {name: getattr(sequence, name) for name in SEQUENCE_FIELDS}
    for name in ("prompt_ids", "completion_ids", "mask", "logprobs"):
        row[name] = None if row[name] is None else list(row[name])
    row["version_segments"] = [list(segment) for segment in sequence.version_segments]
    row["turn_calls"] = [dataclasses.asdict(call) for call in sequence.turn_calls]
    return row


def write_sequences_jsonl(episodes: Iterable[EpisodeRecord], path: Path) -> int:
    """One ``TokenSequence`` per line, for every episode; returns how many lines were written.

    Raises ``MissingTokensError`` (before writing anything) when an episode has no token ids.
    """
    rows = [json.dumps(sequence_row(s)) for s in episode_sequences(episodes)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{row}\n" for row in rows))
    os.replace(tmp, path)
    return len(rows)


#: Fields added after the first rows were written: rows without them load with the defaults.
_ADDED = frozenset({"first_turn", "start", "outcome", "blame", "masked", "version_segments", "turn_calls"})


def load_sequences_jsonl(path: Path) -> list[TokenSequence]:
    """The sequences ``write_sequences_jsonl`` wrote, as equal objects."""
    sequences = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            values = {name: row[name] for name in SEQUENCE_FIELDS if name in row or name not in _ADDED}
            if "turn_calls" in values:
                values["turn_calls"] = tuple(TurnCall(**call) for call in values["turn_calls"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{number}: not a token sequence row ({e})") from None
        for name in ("prompt_ids", "completion_ids", "mask", "logprobs"):
            values[name] = None if values[name] is None else tuple(values[name])
        if "version_segments" in values:
            values["version_segments"] = tuple(tuple(segment) for segment in values["version_segments"])
        sequences.append(TokenSequence(**values))
    return sequences
