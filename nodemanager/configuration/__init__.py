"""Configuration: the INI file's option tables and parsing, and the typed settings they give.

:func:`load` / :func:`loads` read a configuration into :class:`Settings` (or raise
:class:`ConfigError` naming file, line, section and option); the shipped profiles sit beside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager import lazy_names

if TYPE_CHECKING:
    from nodemanager.configuration.config import ConfigError, load, loads
    from nodemanager.configuration.settings import CloudSettings, CoreSettings, DrainSettings, HASettings, ManageSettings, PollSettings, SchedulerSettings, Settings
    from nodemanager.configuration.values import parse_duration

# each public name and the private module that holds it, loaded on first use (importing the
# package loads nothing else, so any part of the tree may import one of its modules)
_HOME = {
    "load": "config",
    "loads": "config",
    "ConfigError": "config",
    "Settings": "settings",
    "CoreSettings": "settings",
    "CloudSettings": "settings",
    "SchedulerSettings": "settings",
    "DrainSettings": "settings",
    "ManageSettings": "settings",
    "PollSettings": "settings",
    "HASettings": "settings",
    "parse_duration": "values",
}

__all__ = ["load", "loads", "ConfigError", "Settings", "CoreSettings", "CloudSettings",
           "SchedulerSettings", "DrainSettings", "ManageSettings", "PollSettings", "HASettings",
           "parse_duration"]


__getattr__ = lazy_names(__name__, _HOME)
