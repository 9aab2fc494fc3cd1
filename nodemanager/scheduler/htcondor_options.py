"""The ``[Scheduler]`` options of ``type = htcondor`` that are numbers, each with its parser and
finite range: checked when the configuration is read, and what the adapter parses them with."""

from __future__ import annotations

from nodemanager.configuration.values import seconds

__all__ = ["NUMBERS"]

NUMBERS = {"query_timeout": seconds(1, 3600, zero=False)}
