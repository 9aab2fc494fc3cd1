"""The data the controller works on: frozen dataclasses, no behaviour beyond small derived values.

Times are epoch seconds (float). Pollers build the inputs (:mod:`.records`: sizes, cloud nodes,
workers, demand, the :class:`Snapshot`); the pure core (``nodemanager.core``) turns a snapshot into
a :class:`Plan` (:mod:`.plan`); the controller hands each cycle on as a :class:`CycleReport`
(:mod:`.report`) to the logs, the metrics and the status page.
"""

from nodemanager.model.plan import *  # noqa: F401,F403
from nodemanager.model.plan import __all__ as _plan
from nodemanager.model.records import *  # noqa: F401,F403
from nodemanager.model.records import __all__ as _records
from nodemanager.model.plan import TimedChange
from nodemanager.model.report import DENIABLE_ACTIONS, CycleReport
from nodemanager.model.same_records import SameRecords, node_id

__all__ = [*_records, *_plan, "CycleReport", "DENIABLE_ACTIONS", "TimedChange", "SameRecords", "node_id"]
