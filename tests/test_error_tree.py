"""Every exception class ARES defines is an ``AresError`` (with a stdlib base where callers expect
one), or one of the few signals that never leave the module that raises them (listed here, with why)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from ares.errors import (
    AresError,
    AresTimeoutError,
    LLMError,
    LLMTimeoutError,
    PolicyError,
    PolicyTimeoutError,
    SandboxError,
    SandboxTimeoutError,
    VerifierError,
    VerifierTimeoutError,
)

#: Exceptions used as control flow inside one module (caught there, never raised to a caller).
SIGNALS = {
    "ares.llm.interceptor.AgentFinished": "the code agent's end, raised through its LLM client",
    "ares.llm._wire.Bad": "a malformed wire message, turned into MalformedResponseError at once",
    "ares.agents.mini_swe.bridge.EpisodeClosed": "unwinds mini-swe-agent's loop when the episode ends",
    "ares.agents.file_tool.ToolCallError": "a bad tool call, answered to the model as a tool result",
    "ares.images.store.pipe.PipeClosed": "the reader of a layer pipe went away",
    "ares.images.store.extract.LayerRefused": "an unsafe layer entry, skipped and counted",
    "ares.images.layer_writer.UnsafeEntry": "an unsafe path in a layer being written, refused there",
    "ares.sandbox.local.layers.DirTooLarge": "a dir past its bound, turned into a refusal or summary",
    "ares.doctor._kernel_probe.Failed": "a failed probe step in a child process, printed as its answer",
    "ares.factory.mutate.splice.Refused": "a mutation that cannot be spliced, skipped",
    "ares.tasks.isolated.CodecError": "a frame the confined candidate sent, judged as a failure",
    "ares.tasks.isolated.CandidateError": "the confined candidate's outcome, judged by the checker",
    "ares.tasks.isolated.CandidateRaised": "the confined candidate's outcome, judged by the checker",
    "ares.tasks.isolated.CandidateFailed": "the confined candidate's outcome, judged by the checker",
    "ares.proxy.errors.ApiError": "an error answer of the proxy, sent to the agent as HTTP",
}


_COLLECT = """
import importlib, inspect, json, pkgutil, sys
import ares
from ares.errors import AresError
found = {}
for info in pkgutil.walk_packages(ares.__path__, "ares."):
    try:
        module = importlib.import_module(info.name)
    except ImportError:  # an optional extra (ray, torch, vendor SDKs) is not installed
        continue
    for name, value in vars(module).items():
        if (inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name
                and not issubclass(value, Warning)):
            found[info.name + "." + name] = issubclass(value, AresError)
json.dump(found, sys.stdout)
"""


@functools.cache
def _exception_classes() -> dict[str, bool]:
    """Every exception class defined in ``ares`` -> whether it is an ``AresError`` (every module is
    imported, in a child process so that this one keeps its state)."""
    done = subprocess.run([sys.executable, "-c", _COLLECT], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_every_error_ares_raises_is_an_ares_error() -> None:
    classes = _exception_classes()
    assert len(classes) > 50, sorted(classes)
    outside = sorted(name for name, is_ares in classes.items() if not is_ares and name not in SIGNALS)
    assert outside == [], "derive these from AresError (or list them as signals, with why)"


def test_the_signal_list_names_real_classes() -> None:
    classes = _exception_classes()
    assert sorted(set(SIGNALS) - set(classes)) == []
    assert [name for name in SIGNALS if classes[name]] == []


@pytest.mark.parametrize(
    ("error", "family"),
    [
        (LLMTimeoutError, LLMError),
        (PolicyTimeoutError, PolicyError),
        (SandboxTimeoutError, SandboxError),
        (VerifierTimeoutError, VerifierError),
    ],
)
def test_timeouts_are_one_family_and_stdlib_timeouts(error: type[Exception], family: type[Exception]) -> None:
    assert (
        issubclass(error, family) and issubclass(error, AresTimeoutError) and issubclass(error, TimeoutError)
    )


def test_data_errors_stay_value_errors() -> None:
    from ares.factory.baseline import BaselineError
    from ares.records.exports.atif import EmptyTrajectoryError
    from ares.training.sequences import MissingTokensError, PrefixError

    for cls in (MissingTokensError, PrefixError, EmptyTrajectoryError, BaselineError):
        assert issubclass(cls, AresError) and issubclass(cls, ValueError), cls
