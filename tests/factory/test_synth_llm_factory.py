"""The LLM strategy and the statement writer inside the whole factory, on the toolz fixture project: a
bug a (scripted) policy writes into ``frequencies`` is validated in a fork like any other candidate
and ends up as an instance naming the policy, with the policy's statement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth_sources import plain_dir

from ares.factory.asking import PolicySpec
from ares.factory.factory import SynthOptions, synthesize
from ares.tasks.swe.harness import swebench_available

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")
BUG = '''```python
def frequencies(seq):
    """ Find number of occurrences of each value in seq """
    d = collections.defaultdict(int)
    for item in seq:
        d[item] += 2
    return dict(d)
```'''
STATEMENT = "Counts of repeated values are wrong\n\nCounting how often each value occurs gives too much.\n"


async def test_a_policy_written_bug_becomes_an_instance(clones: dict[str, Path], tmp_path: Path) -> None:
    bug_script, writer_script = tmp_path / "bug.jsonl", tmp_path / "writer.jsonl"
    bug_script.write_text(json.dumps({"content": BUG}) + "\n")
    writer_script.write_text(json.dumps({"content": STATEMENT}) + "\n")
    options = SynthOptions(
        strategies=("llm_modify",),
        combinations=0,
        llm_policy=PolicySpec("scripted", {"script": bug_script}),
        llm_functions=1000,  # every function is asked; the script's answer fits frequencies only
        writer=PolicySpec("scripted", {"script": writer_script}),
        timeout_s=60,
    )
    out = tmp_path / "set"
    report = await synthesize(str(plain_dir(clones["toolz"], tmp_path / "toolz")), out, options, say=print)

    assert report.llm is not None and report.candidates == 1
    counts = report.llm["by_strategy"]["llm_modify"]
    assert counts["spliced"] == 1 and counts["refused:wrong_function"] == counts["questions"] - 1
    (row,) = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    synth = row["synth"]
    assert (synth["strategy"], synth["qualname"], synth["policy"]) == (
        "llm_modify",
        "frequencies",
        "scripted",
    )
    assert "toolz/tests/test_itertoolz.py::test_frequencies" in json.loads(row["FAIL_TO_PASS"])
    assert "-        d[item] += 2\n+        d[item] += 1\n" in row["patch"]  # the fix, and nothing else
    assert row["problem_statement"] == STATEMENT and synth["statement_writer"] == "scripted"
    assert report.writer is not None and report.writer["written"] == 1 and report.statements_replaced == 0
