"""PolicyFlags: a policy spec and the flags that configure it, checked, turned into its options.

``ares run`` has one policy (``--policy``); ``ares tasks synth`` may have two (``--llm-policy``,
``--writer``) sharing one set of flags. Both build ``PolicyFlags`` so that the same mistakes get the
same one-line errors and the same flags give the same ``make_policy`` options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ares.cli.common import fail
from ares.errors import AresError
from ares.policies import API_POLICIES, LOCAL_OPTIONS, LOCAL_POLICY, POLICY_NAMES, split_policy

#: The API policies' flags, by field name.
API_FIELDS = ("model", "base_url", "api_key_env", "max_tokens", "temperature", "timeout")


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class PolicyFlags:
    """One policy spec and its flags; ``flag``/``script_flag`` are how this command spells them."""

    policy: str
    script: Path | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    flag: str = "--policy"
    script_flag: str = "--script"

    def __post_init__(self) -> None:
        base = self.base
        if base not in POLICY_NAMES:
            known = ", ".join(POLICY_NAMES)
            raise fail(f"unknown policy {self.policy!r}; choose one of: {known} (or local:PATH.gguf)")
        if self.script is not None and self.policy != "scripted":
            raise fail(f"{self.script_flag} applies to {self.flag} scripted only, not {self.policy!r}")
        if self.policy == "scripted" and self.script is None:
            raise fail(f"{self.flag} scripted needs {self.script_flag} FILE.jsonl (one response per line)")
        given = [flag_name(name) for name in API_FIELDS if getattr(self, name) is not None]
        if base == LOCAL_POLICY:
            given = [flag for flag in given if flag.removeprefix("--").replace("-", "_") not in LOCAL_OPTIONS]
        if given and self.policy not in API_POLICIES:
            verb = "applies" if len(given) == 1 else "apply"
            others = ", ".join(API_POLICIES[1:])
            raise fail(
                f"{', '.join(given)} {verb} to {self.flag} openai only (and the SDK policies {others})"
            )
        name = self.api_key_env
        if name is not None and not os.environ.get(name):
            raise fail(f"--api-key-env {name}: ${name} is not set (or empty); export {name}=YOUR_KEY")

    @property
    def base(self) -> str:
        """The spec's policy name (``local:/m.gguf`` -> ``local``)."""
        try:
            return split_policy(self.policy)[0]
        except AresError as exc:
            raise fail(str(exc)) from None

    @classmethod
    def taking(cls, policy: str, given: dict[str, Any], **spelling: str) -> PolicyFlags:
        """The flags of ``given`` (field -> value) that ``policy`` takes: for commands where one set of
        flags serves several policies. ``spelling``: ``flag``/``script_flag``."""
        probe = cls(policy, **spelling) if policy != "scripted" else None
        base = probe.base if probe is not None else "scripted"
        if base == "scripted":
            names: tuple[str, ...] = ("script",)
        elif base == LOCAL_POLICY:
            names = LOCAL_OPTIONS
        elif policy in API_POLICIES:
            names = API_FIELDS
        else:
            names = ()
        return cls(policy, **{k: v for k, v in given.items() if k in names}, **spelling)

    @property
    def options(self) -> dict[str, Any]:
        """``make_policy(policy, **them)``: the options the chosen policy takes that were given."""
        if self.base == LOCAL_POLICY:
            names = {"max_tokens": self.max_tokens, "temperature": self.temperature}
            return {k: v for k, v in names.items() if k in LOCAL_OPTIONS and v is not None}
        if self.policy in API_POLICIES:
            names = {"model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env}
            names |= {
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "timeout_s": self.timeout,
            }
            return {k: v for k, v in names.items() if v is not None}
        return {"script": self.script} if self.script is not None else {}


def unused_flags(
    given: dict[str, Any], taken: list[PolicyFlags], *, script_flag: str = "--script"
) -> list[str]:
    """The flags given a value that none of ``taken`` uses (``given``: field -> value)."""
    used = {f.name for flags in taken for f in fields(flags) if getattr(flags, f.name) is not None}
    spelled = {"script": script_flag}
    return [
        spelled.get(name, flag_name(name))
        for name, value in given.items()
        if value is not None and name not in used
    ]
