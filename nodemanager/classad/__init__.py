"""The ClassAd expression language, as far as the controller needs it: parsing and evaluating
escalation expressions and startd policy (:mod:`.expressions`), and reading numbers and truth from
ad values (:mod:`.values`). Shared by the HTCondor adapter, the simulated pool and the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager import lazy_names

if TYPE_CHECKING:
    from nodemanager.classad.expressions import evaluate, is_true, parse
    from nodemanager.classad.values import ad_number, ad_true

# each public name and the private module that holds it, loaded on first use (importing the
# package loads nothing else, so any part of the tree may import one of its modules)
_HOME = {
    "evaluate": "expressions",
    "is_true": "expressions",
    "parse": "expressions",
    "ad_number": "values",
    "ad_true": "values",
}

__all__ = ["evaluate", "is_true", "parse", "ad_number", "ad_true"]


__getattr__ = lazy_names(__name__, _HOME)
