"""Sandboxes: the Sandbox protocol and its backends (``local`` is the embedded default)."""

from ares.sandbox.base import (
    BindMount,
    ExecResult,
    FileMap,
    ImageSpec,
    Resources,
    Sandbox,
    SandboxFactory,
    SandboxSpec,
    SeccompPolicy,
)

__all__ = [
    "BindMount",
    "ExecResult",
    "FileMap",
    "ImageSpec",
    "Resources",
    "Sandbox",
    "SandboxFactory",
    "SandboxSpec",
    "SeccompPolicy",
]
