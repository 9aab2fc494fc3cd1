"""Protected mode for sizes whose VMs fail to join (issue 14 item 5). Pure.

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
    by_size: dict[str, list[NodeExplanation]] = {}
    for e in nodes:
        by_size.setdefault(e.size, []).append(e)
    out: dict[str, BootRecord] = {}
    for size in set(records) | set(by_size):
        r = records.get(size, BootRecord())
        listed = by_size.get(size, [])
        unpaired = [e for e in listed if e.tuple.worker_state == UNPAIRED]
        booting = frozenset(e.node_id for e in unpaired if e.tuple.boot_grace != BOOT_EXCEEDED)
        exceeded = {e.node_id for e in unpaired if e.tuple.boot_grace == BOOT_EXCEEDED}
        joined = any(e.node_id in r.booting for e in listed if e.tuple.worker_state != UNPAIRED)
        failures, until = r.failures, r.until
        new_failures = exceeded - r.failed
        if joined:
            failures, until = 0, 0.0
        elif new_failures:
            failures += len(new_failures)
            if after > 0 and failures >= after:
                until = now + min(backoff * 2 ** (failures - after), max_backoff)
        listed_ids = {e.node_id for e in listed}
        record = BootRecord(failures, until, booting, frozenset((r.failed & listed_ids) | exceeded))
        if record != BootRecord():
            out[size] = record
    return out


def protected_sizes(records: Mapping[str, BootRecord], now: float) -> dict[str, str]:
    """Size name -> why it is protected now, in words (sizes not protected are left out)."""
    return {size: (f"protected: {r.failures} boot(s) in a row did not join the scheduler; not "
                   f"booted for {duration(r.until - now)} more (a join resets it)")
            for size, r in sorted(records.items()) if r.until > now}
