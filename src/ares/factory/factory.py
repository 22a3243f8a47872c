"""``ares tasks synth``: one project in, validated SWE-format instances out.

The pipeline, each step its own module:

1. ``project.resolve_project``: the source as a one-commit repository, its packages, tests, test deps;
2. ``image_dir.write_image_dir`` + the local builder: the project installed once, tagged
   ``ares-synth/<name>:<version>-<digest of its content>``;
3. ``baseline.take_baseline``: the suite run once in that image and snapshotted;
4. ``mutate.candidates``: single-edit bugs on the syntax tree (capped, deterministic for a seed);
   with ``llm_policy``, also bugs a policy writes into a sample of functions (``llm_bugs``);
5. ``validate.validate_all``: each candidate in a fork of the snapshot, twice (resumable);
6. ``mutate.combine``: pairs of kept bugs in one file, validated the same way (harder tasks);
7. ``instances``: a root base commit per kept bug, the fix and hidden-test diffs, a statement
   (``statements``, or the ``writer`` policy's (``writer``); one that names the fix's file or quotes
   its lines is replaced by a terser template one);
   then the image is rebuilt with every base in its repository, and ``instances.jsonl`` and
   ``synth.json`` (the yield per strategy and per reason) are written.

Everything under ``OUT/work`` makes a rerun cheap: trials already judged are not run again.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
import os
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ares.factory import statements
from ares.factory.asking import Asker, PolicySpec
from ares.factory.baseline import baseline_of
from ares.factory.image_dir import image_tag, write_image_dir
from ares.factory.instances import (
    BaseCommit,
    commit_base,
    hidden_test_files,
    instance_id,
    instance_row,
    publish_ref,
    write_instances,
)
from ares.factory.llm_bugs import CONCURRENCY, LLM_STRATEGIES, llm_mutations
from ares.factory.mutate import Mutation, candidates, combine, diff
from ares.factory.project import Project, resolve_project
from ares.factory.trial import Trial
from ares.factory.validate import Summary, read_results, validate_all
from ares.factory.verdict import Bounds
from ares.factory.writer import written_statement
from ares.sandbox.local.images import local_builder


@dataclass(frozen=True)
class SynthOptions:
    """Knobs of one run (the CLI's options). ``strategies`` may name the LLM strategies only with
    ``llm_policy``; with it and no ``strategies``, every strategy runs."""

    strategies: tuple[str, ...] | None = None
    max_candidates: int = 300
    per_function: int | None = 2
    combinations: int = 40
    workers: int | None = None
    timeout_s: float = 60.0
    max_failing: int = 50
    tests_visible: bool = False
    seed: int = 0
    llm_policy: PolicySpec | None = None
    llm_functions: int = 20
    writer: PolicySpec | None = None

    def procedural(self) -> tuple[str, ...] | None:
        """The procedural strategies asked for (None: all)."""
        if self.strategies is None:
            return None
        return tuple(s for s in self.strategies if s not in LLM_STRATEGIES)

    def llm(self) -> tuple[str, ...]:
        """The LLM strategies to run (none without ``llm_policy``)."""
        asked = (
            LLM_STRATEGIES
            if self.strategies is None
            else tuple(s for s in self.strategies if s in LLM_STRATEGIES)
        )
        if asked and self.llm_policy is None and self.strategies is not None:
            raise ValueError(f"the strategies {', '.join(asked)} need an LLM policy (--llm-policy SPEC)")
        return asked if self.llm_policy is not None else ()


@dataclass(frozen=True)
class Keyed:
    """A mutation with the key validation files it under (a hash of its diff)."""

    mutation: Mutation
    key: str

    @property
    def path(self) -> str:
        return self.mutation.path

    @property
    def after(self) -> str:
        return self.mutation.after

    @property
    def strategy(self) -> str:
        return self.mutation.strategy

    @classmethod
    def of(cls, mutation: Mutation) -> Keyed:
        return cls(mutation, hashlib.sha256(diff(mutation).encode()).hexdigest()[:20])


@dataclass(frozen=True)
class SynthReport:
    """What a run made: the set, its image, and the yield."""

    project: str
    version: str
    image: str
    out: Path
    candidates: int
    singles: Summary
    combinations: Summary | None
    instances: int
    statements_replaced: int = 0
    by_strategy: dict[str, int] = field(default_factory=dict)
    llm: dict[str, Any] | None = None
    writer: dict[str, Any] | None = None
    #: Tests whose result or id differed between two baseline runs (in no task's lists).
    unstable_tests: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"] = str(self.out)
        return data


@dataclass(frozen=True)
class _Run:
    """What every step of one run reads: the project, the options, the work directory, the progress line."""

    project: Project
    options: SynthOptions
    work: Path
    say: Callable[[str], None]


@dataclass(frozen=True)
class _Judged:
    """What validation against the baseline made of the candidates (and of their combinations)."""

    singles: Summary
    combined: Summary | None
    kept: list[Trial]
    unstable: tuple[str, ...]


async def synthesize(
    source: str, out: Path, options: SynthOptions = SynthOptions(), *, say: Callable[[str], None] = print
) -> SynthReport:
    """Run the whole pipeline for ``source`` into ``out`` (see the module docstring)."""
    llm_strategies = options.llm()  # before any work: a mistake in the options fails at once
    bug_asker = Asker.of(options.llm_policy) if options.llm_policy is not None and llm_strategies else None
    writer = Asker.of(options.writer) if options.writer is not None else None
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    project = await resolve_project(source, work)
    packages, tests = ", ".join(project.package_dirs), ", ".join(project.test_paths)
    say(f"{project.name} {project.version}: packages {packages}; tests {tests}")
    run = _Run(project, options, work, say)
    tag = image_tag(project)
    image_dir = out / "images" / project.name
    await _build_image(project, image_dir, tag)
    mutations = await asyncio.to_thread(_candidates, project, options)
    llm_report = None
    if bug_asker is not None:
        known = {keyed.key for keyed in mutations}
        fresh, llm_report = await _llm_candidates(run, bug_asker, llm_strategies, known)
        mutations += fresh
    by_key = {keyed.key: keyed for keyed in mutations}
    judged = await _judge(run, tag, mutations, by_key)
    rows, replaced, writer_report = await _rows(project, judged.kept, by_key, tag, options, writer)
    refs = tuple(str(row["instance_id"]) for row in rows)
    tag = image_tag(project, refs)
    for row in rows:
        row["image"] = tag
    await _build_image(project, image_dir, tag, refs)
    write_instances(rows, out / "instances.jsonl")
    if llm_report is not None:
        llm_report["instances"] = sum(1 for row in rows if row["synth"]["policy"] is not None)
    report = SynthReport(
        project.name, project.version, tag, out, len(mutations), judged.singles, judged.combined, len(rows),
        replaced, _by_strategy(rows), llm_report, writer_report, judged.unstable,
    )  # fmt: skip
    _write_report(report, out)
    return report


async def _build_image(project: Project, image_dir: Path, tag: str, refs: tuple[str, ...] = ()) -> None:
    """The project's image, with the base commits ``refs`` in its repository, built under ``tag``."""
    await asyncio.to_thread(functools.partial(write_image_dir, project, image_dir, instance_refs=refs))
    await local_builder().build(image_dir, tags=(tag,))


async def _llm_candidates(
    run: _Run, asker: Asker, strategies: tuple[str, ...], known: set[str]
) -> tuple[list[Keyed], dict[str, Any]]:
    """The bugs ``asker`` writes whose keys are not ``known`` (found already), and the LLM report."""
    project, options = run.project, run.options
    wanted = ", ".join(strategies)
    run.say(f"asking {asker.name} for bugs ({wanted}) in up to {options.llm_functions} functions")
    written, llm_report = await llm_mutations(
        project.root, project.package_dirs, asker, strategies, functions=options.llm_functions,
        seed=options.seed, cache=run.work / "llm_answers.jsonl",
    )  # fmt: skip
    unique = {keyed.key: keyed for keyed in map(Keyed.of, written)}
    fresh = [keyed for key, keyed in unique.items() if key not in known]
    llm_report["candidates"] = len(fresh)
    run.say(f"{asker.name} wrote {len(fresh)} candidate bugs")
    return fresh, llm_report


async def _judge(run: _Run, tag: str, mutations: list[Keyed], by_key: dict[str, Keyed]) -> _Judged:
    """Validate the candidates, then combinations of the kept ones, against one baseline of ``tag``;
    the combinations are added to ``by_key``."""
    options, work, say = run.options, run.work, run.say
    bounds = Bounds(max_failing=options.max_failing)
    async with baseline_of(tag, run.project.test_paths) as baseline:
        say(f"baseline: {len(baseline.passed)} tests pass" + _unstable_note(baseline.unstable))
        unstable = tuple(sorted(baseline.unstable))
        singles = await validate_all(
            baseline, mutations, results=work / "trials.jsonl", workers=options.workers,
            timeout_s=options.timeout_s, bounds=bounds,
        )  # fmt: skip
        kept = _kept(work / "trials.jsonl", by_key)
        combos = _combinations(kept, by_key, options)
        for keyed in combos:
            by_key[keyed.key] = keyed
        combined = None
        if combos:
            say(f"{len(kept)} kept; trying {len(combos)} combinations")
            combined = await validate_all(
                baseline, combos, results=work / "combinations.jsonl", workers=options.workers,
                timeout_s=options.timeout_s, bounds=bounds,
            )  # fmt: skip
            kept += _kept(work / "combinations.jsonl", by_key)
    return _Judged(singles, combined, kept, unstable)


def _kept(results: Path, by_key: dict[str, Keyed]) -> list[Trial]:
    """The kept trials in a results file, of this run's candidates only (the file may hold older ones)."""
    return [t for t in read_results(results).values() if t.kept and t.key in by_key]


def _by_strategy(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many instances each strategy made, by strategy name."""
    strategies: defaultdict[str, int] = defaultdict(int)
    for row in rows:
        strategies[row["synth"]["strategy"]] += 1
    return dict(sorted(strategies.items()))


def _write_report(report: SynthReport, out: Path) -> None:
    """``synth.json``, replaced atomically so a reader never sees half a report."""
    scratch = out / f".synth.json.{os.getpid()}"
    scratch.write_text(json.dumps(report.to_dict(), indent=1, default=str))
    os.replace(scratch, out / "synth.json")


def _unstable_note(unstable: frozenset[str]) -> str:
    if not unstable:
        return ""
    return f" ({len(unstable)} unstable between two runs, left out of every task)"


def _candidates(project: Project, options: SynthOptions) -> list[Keyed]:
    procedural = options.procedural()
    if procedural == ():
        return []
    found = candidates(
        project.root, project.package_dirs, strategies=procedural, seed=options.seed,
        limit_per_function=options.per_function,
    )  # fmt: skip
    unique: dict[str, Keyed] = {}
    for mutation in found:
        keyed = Keyed.of(mutation)
        unique.setdefault(keyed.key, keyed)
    pool = list(unique.values())
    if len(pool) > options.max_candidates:
        pool = random.Random(options.seed).sample(pool, options.max_candidates)
        pool.sort(key=lambda k: (k.path, k.mutation.line, k.strategy))
    return pool


def _combinations(kept: Sequence[Trial], by_key: dict[str, Keyed], options: SynthOptions) -> list[Keyed]:
    """Up to ``options.combinations`` pairs of kept bugs in one file, in different functions."""
    per_file: dict[str, list[Mutation]] = defaultdict(list)
    for trial in kept:
        per_file[trial.path].append(by_key[trial.key].mutation)
    pairs = [
        (a, b)
        for mutations in per_file.values()
        for a, b in itertools.combinations(mutations, 2)
        if a.qualname != b.qualname
    ]
    random.Random(options.seed).shuffle(pairs)
    made: dict[str, Keyed] = {}
    for a, b in pairs:
        if len(made) >= options.combinations:
            break
        merged = combine([a, b])
        if merged is not None:
            keyed = Keyed.of(merged)
            made.setdefault(keyed.key, keyed)
    return list(made.values())


async def _rows(
    project: Project,
    kept: Sequence[Trial],
    by_key: dict[str, Keyed],
    image: str,
    options: SynthOptions,
    writer: Asker | None,
) -> tuple[list[dict[str, Any]], int, dict[str, Any] | None]:
    """One row per kept trial; also how many statements were replaced (leaking template text, or a
    writer's answer that failed or leaked) and the writer's tally."""
    meta = {
        "name": project.name, "version": project.version, "licence": project.licence,
        "pristine": project.base_commit, "repo": f"synth/{project.name}",
    }  # fmt: skip
    ordered = sorted(kept, key=lambda t: t.key)
    bases = await asyncio.to_thread(_bases, project, ordered, by_key, options)
    gate = asyncio.Semaphore(CONCURRENCY)
    tally: defaultdict[str, int] = defaultdict(int)

    async def statement(trial: Trial, bug: Mutation, base: BaseCommit) -> tuple[str, str, bool]:
        failures = trial.extra.get("failures") or {}
        if writer is not None:
            async with gate:
                text, outcome = await written_statement(
                    writer, project.name, trial.fail_to_pass, failures, patch=base.patch, paths=[bug.path]
                )
            tally[outcome] += 1
            if text is not None:
                return text, writer.name, False
        text = statements.template_statement(
            project.name, trial.fail_to_pass, failures, tests_visible=options.tests_visible
        )
        if statements.quotes_the_diff(text, base.patch, [bug.path]):
            text = statements.template_statement(project.name, trial.fail_to_pass, {}, tests_visible=False)
            return text, "template", True
        return text, "template", writer is not None

    texts = await asyncio.gather(
        *(statement(trial, by_key[trial.key].mutation, base) for trial, base in bases)
    )
    rows = [
        instance_row(
            project=meta,
            bug=by_key[trial.key].mutation,
            outcome=trial,
            base=base,
            image=image,
            test_paths=project.test_paths,
            statement=text,
            tests_visible=options.tests_visible,
            writer=author,
        )
        for (trial, base), (text, author, _) in zip(bases, texts, strict=True)
    ]
    writer_report = None if writer is None else {**dict(sorted(tally.items())), "asking": writer.report()}
    return rows, sum(replaced for _, _, replaced in texts), writer_report


def _bases(
    project: Project, kept: Sequence[Trial], by_key: dict[str, Keyed], options: SynthOptions
) -> list[tuple[Trial, BaseCommit]]:
    """Each kept trial's base commit, published under its instance id (blocking: git)."""
    bases = []
    for trial in kept:
        bug = by_key[trial.key].mutation
        hide = () if options.tests_visible else hidden_test_files(trial.fail_to_pass)
        base = commit_base(project.root, project.base_commit, bug, hide)
        publish_ref(project.root, instance_id(project.name, base.patch), base.commit)
        bases.append((trial, base))
    return bases
