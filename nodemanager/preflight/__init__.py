"""Preflight: everything ``nodemanager run`` needs, checked without changing anything
(``nodemanager check``, and the checks ``run`` logs at start)."""

from nodemanager.preflight.checklist import Check, log_checks, render
from nodemanager.preflight.checks import preflight, start_checks

__all__ = ["Check", "preflight", "render", "start_checks", "log_checks"]
