"""Procedural bugs on the syntax tree (libcst, formatting kept, so each patch is a minimal diff).

Modules: ``mutation`` (the ``Mutation`` record and its ``git apply``-able ``diff``), ``operator``
(the operator seam), one module per operator family (``comparison``, ``boolean``, ``arithmetic``,
``off_by_one``, ``constants``, ``conditions``, ``statements``, ``handlers``, ``arguments``),
``registry`` (all operators in order), ``collect`` (sites in function bodies), ``render`` (the
mutated file), ``candidates`` (walk a project) and ``combine`` (several bugs in one file).
"""

from .candidates import candidates, source_files
from .combine import combine
from .mutation import Mutation, diff
from .registry import OPERATORS, STRATEGIES

__all__ = ["OPERATORS", "STRATEGIES", "Mutation", "candidates", "combine", "diff", "source_files"]
