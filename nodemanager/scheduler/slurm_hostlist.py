"""SLURM hostlists (``node[1-3,05],gpu1``) and job array specs (``4-20%3``), counted before they
are expanded so that no reply can make us build millions of names. Pure.
"""

from __future__ import annotations

import re

from nodemanager.scheduler.records import MAX_COUNT

__all__ = ["expand_hostlist", "array_task_count", "MAX_HOSTS"]

# A hostlist naming more nodes than this is no real job's (SLURM's largest clusters have ~10^4).
MAX_HOSTS = 100_000

def expand_hostlist(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """``node[1-3,05],gpu1`` → ``(node1, node2, node3, node05, gpu1)`` (SLURM hostlist syntax).
    Raises ValueError for bad syntax or more than ``limit`` names (counted before expanding)."""
    if "[" not in text:  # the common case: plain names, nothing to expand
        names = tuple(n for n in (x.strip() for x in text.split(",")) if n)
    else:
        out: list[str] = []
        for item in _split_top(text):
            out.extend(_expand_one(item, limit - len(out)))
        names = tuple(out)
    if len(names) > limit:
        raise ValueError(f"hostlist names more than {limit} nodes: {text[:60]!r}")
    return names


# A comma outside brackets: no "]" follows before the next "[" (SLURM hostlists do not nest).
_TOP_COMMA = re.compile(r",(?![^\[]*\])")


def _split_top(text: str) -> list[str]:
    return [p for p in (x.strip() for x in _TOP_COMMA.split(text)) if p]


def _expand_one(item: str, budget: int) -> list[str]:
    """The names of one hostlist item; ValueError if more than ``budget`` (before making them)."""
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.find("]", start)
    if end < 0:
        raise ValueError(f"unbalanced '[' in hostlist {item!r}")
    prefix, body, rest = item[:start], item[start + 1:end], item[end + 1:]
    ranges = []
    count = 0
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad range {part!r} in hostlist {item!r}")
        first, last = int(lo), int(hi or lo)
        ranges.append((len(lo), first, last))
        count += max(last - first + 1, 0)
    if count > budget:
        raise ValueError(f"hostlist names more than {budget} nodes: {item[:60]!r}")
    tails = _expand_one(rest, budget // max(count, 1)) if rest else [""]
    return [f"{prefix}{i:0{width}d}{tail}" for width, a, b in ranges for i in range(a, b + 1) for tail in tails]


def array_task_count(text: str) -> int:
    """How many tasks a pending array record like ``4-20%3`` or ``1,3,5-7:2`` stands for."""
    spec = text.split("%", 1)[0].strip()
    total = 0
    for part in spec.split(","):
        if not part:
            continue
        rng, _, step_text = part.partition(":")
        lo, _, hi = rng.partition("-")
        step = int(step_text) if step_text else 1
        total += (int(hi or lo) - int(lo)) // max(step, 1) + 1
    if total > MAX_COUNT:
        raise ValueError(f"{total} tasks is more than {MAX_COUNT}")
    return max(total, 1)
