"""Integrity inside pytest-graded runs: a trusted plugin's account of the test process, checked against
the log the grader reads (see ``plugin`` for what it watches, ``arming`` and ``check`` for the host)."""
