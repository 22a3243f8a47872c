"""``ares doctor``: what this machine supports, which sandbox backends and limits work, what to install.

Probes (one per fact, risky ones in throwaway child processes) produce ``Check`` results; ``report``
turns them into backend and limit verdicts and the commands that install what is missing.
"""

from ares.doctor.check import Check
from ares.doctor.report import Backend, Diagnosis, Limit, diagnose

__all__ = ["Backend", "Check", "Diagnosis", "Limit", "diagnose"]
