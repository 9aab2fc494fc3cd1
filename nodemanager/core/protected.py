"""Protected mode for sizes whose VMs fail to join. Pure.

A size whose booted VMs end their boot grace unpaired ``after`` times in a row (boot exceeded:
they never joined the scheduler) is not booted for a back-off that doubles with each further
failure, from ``backoff`` up to ``max_backoff``; a VM of the size that joins resets it. The
controller keeps the :class:`BootRecord` per size between cycles and feeds each plan's node
explanations to :func:`observe_boots`; :func:`protected_sizes` says which sizes are protected now
and why, for the snapshot (placement skips them), the status page and the metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from nodemanager.model import NodeExplanation
from nodemanager.text import duration
from policy_matrix.vocabulary import BOOT_EXCEEDED, UNPAIRED

__all__ = ["BootRecord", "observe_boots", "protected_sizes"]


@dataclass(frozen=True)
class BootRecord:
    """One size's recent boots: ``failures`` in a row, protected ``until`` (0: not), the node ids
    seen booting (a join of one of them is a success) and those already counted as failed."""

    failures: int = 0
    until: float = 0.0
    booting: frozenset[str] = frozenset()
    failed: frozenset[str] = frozenset()


def observe_boots(records: Mapping[str, BootRecord], nodes: Iterable[NodeExplanation], now: float,
                  after: int, backoff: float, max_backoff: float) -> dict[str, BootRecord]:
    """The records after a plan's ``nodes``: each VM seen booting that ends its boot grace
    unpaired counts one failure (once); one that joins resets its size. ``after`` 0: never
    protect (failures are still counted)."""
    # one pass over the nodes; only the unpaired ones and those a record names are looked at
    booting: dict[str, set[str]] = {}
    exceeded: dict[str, set[str]] = {}
    joined: set[str] = set()
    failed: dict[str, set[str]] = {}
    watched = {nid for r in records.values() for nid in r.booting | r.failed}
    for e in nodes:
        t = e.tuple
        unpaired = t.worker_state == UNPAIRED
        if not unpaired and (not watched or e.node_id not in watched):
            continue
        size, nid = e.size, e.node_id
        if unpaired:
            (exceeded if t.boot_grace == BOOT_EXCEEDED else booting).setdefault(size, set()).add(nid)
        if nid in watched and (r := records.get(size)) is not None:
            if nid in r.booting and not unpaired:
                joined.add(size)
            if nid in r.failed:
                failed.setdefault(size, set()).add(nid)
    out: dict[str, BootRecord] = {}
    # a size with no record and no node booting ends with an empty record: not kept
    for size in set(records) | set(booting) | set(exceeded):
        r = records.get(size, BootRecord())
        new_exceeded = exceeded.get(size, set())
        failures, until = r.failures, r.until
        new_failures = new_exceeded - r.failed
        if size in joined:
            failures, until = 0, 0.0
        elif new_failures:
            failures += len(new_failures)
            if after > 0 and failures >= after:
                until = now + min(backoff * 2 ** (failures - after), max_backoff)
        record = BootRecord(failures, until, frozenset(booting.get(size, ())),
                            frozenset(failed.get(size, set()) | new_exceeded))
        if record != BootRecord():
            out[size] = record
    return out


def protected_sizes(records: Mapping[str, BootRecord], now: float) -> dict[str, str]:
    """Size name -> why it is protected now, in words (sizes not protected are left out)."""
    return {size: (f"protected: {r.failures} boot(s) in a row did not join the scheduler; not "
                   f"booted for {duration(r.until - now)} more (a join resets it)")
            for size, r in sorted(records.items()) if r.until > now}
