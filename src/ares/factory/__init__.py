"""The task factory: SWE-bench-format instances made from any Python repository with tests.

``ares tasks synth SOURCE --out DIR``: resolve the project (``project``), install it once in an image,
generate candidate bugs on its syntax tree (``mutate``), validate each in a fork of the installed
sandbox (``validate``), and write the survivors as instances (``instances``) with issue-style problem
statements (``statements``) that the SWE loader runs unchanged.
"""
