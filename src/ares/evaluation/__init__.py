"""Evaluation applications: grade what other agents produced as ARES grades its own (``swe``:
SWE-bench predictions files, ``ares eval``)."""
