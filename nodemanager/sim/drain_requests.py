"""What a simulated startd's drain command accepts and how it refuses, in HTCondor's own terms."""

from __future__ import annotations

__all__ = [
    "DrainError", "GRACEFUL", "QUICK", "FAST", "SCHEDULES", "COMPLETIONS",
    "DRAINING_ALREADY_IN_PROGRESS", "DRAINING_NO_MATCHING_REQUEST_ID", "DRAINING_CHECK_EXPR_FAILED",
]

GRACEFUL, QUICK, FAST = "graceful", "quick", "fast"
SCHEDULES = (GRACEFUL, QUICK, FAST)
# CompletionType names, in the bindings' order (Nothing=0 ... Reconfig=4).
COMPLETIONS = ("nothing", "resume", "exit", "restart", "reconfig")

# condor_error_codes.h
DRAINING_ALREADY_IN_PROGRESS = 10001
DRAINING_NO_MATCHING_REQUEST_ID = 10002
DRAINING_CHECK_EXPR_FAILED = 10003


class DrainError(Exception):
    """The startd refused a drain or cancel request (``code`` is HTCondor's error code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
