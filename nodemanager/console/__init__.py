"""What operators read and call: the status page and its JSON document, the Prometheus metrics,
each node's history, the decision log, the admin API and the HTTP server that serves them.

All of it only reads the controller's :class:`~nodemanager.model.CycleReport`; the admin API's
state is the one thing operators write, and the controller reads it at the next cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager import lazy_names

if TYPE_CHECKING:
    from nodemanager.console.admin import AdminState, AdminStateError
    from nodemanager.console.decision_log import DecisionLog
    from nodemanager.console.history import NodeHistory
    from nodemanager.console.http_server import BindError
    from nodemanager.console.metrics import Metrics
    from nodemanager.console.page import render_html
    from nodemanager.console.status import StatusServer
    from nodemanager.console.status_document import StatusView
    from nodemanager.console.whynot import WhyNots, why_not

# each public name and the private module that holds it, loaded on first use (importing the
# package loads nothing else, so any part of the tree may import one of its modules)
_HOME = {
    "StatusServer": "status",
    "StatusView": "status_document",
    "Metrics": "metrics",
    "NodeHistory": "history",
    "DecisionLog": "decision_log",
    "AdminState": "admin",
    "AdminStateError": "admin",
    "BindError": "http_server",
    "render_html": "page",
    "why_not": "whynot",
    "WhyNots": "whynot",
}

__all__ = ["StatusServer", "StatusView", "Metrics", "NodeHistory", "DecisionLog",
           "AdminState", "AdminStateError", "BindError", "render_html", "why_not", "WhyNots"]


__getattr__ = lazy_names(__name__, _HOME)
