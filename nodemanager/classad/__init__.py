"""The ClassAd expression language, as far as the controller needs it: parsing and evaluating
escalation expressions and startd policy (:mod:`.expressions`), and reading numbers and truth from
ad values (:mod:`.values`). Shared by the HTCondor adapter, the simulated pool and the core.

No face: the rest of the tree imports :mod:`.expressions` or :mod:`.values` directly.
"""
