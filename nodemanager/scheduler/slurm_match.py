"""SLURM pending jobs matched to sizes: partition, ``--constraint``, ``--gres``.

A size serves a job when it is in one of the job's partitions (a size that names no
``partitions`` serves every partition), its ``features`` satisfy the job's constraint (``&``,
``|``, ``!``, parentheses, and ``[...]`` read as parentheses: every node of a job comes from one
size, so SLURM's "matching OR" is an OR here; a count ``avx*2`` asks for the feature), and it has
the GPUs the job's ``--gres`` asks per node (``gpu:N`` or ``gpu:TYPE:N`` against ``gpus`` and
``gpu_type``). An ``--exclusive`` job takes a whole node: its demand is the smallest size that can
run it, all of it. Pure functions; :mod:`nodemanager.scheduler.slurm_json` calls them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Union

from nodemanager.model import Size
from nodemanager.scheduler.slurm_gres import parse_gres

if TYPE_CHECKING:
    from nodemanager.scheduler.slurm_json import SlurmJob

__all__ = ["Constraint", "parse_constraint", "constraint_holds", "SlurmMatcher"]


@dataclass(frozen=True, slots=True)
class _Op:
    op: str                      # "&", "|" or "!"
    args: tuple["Constraint", ...]


Constraint = Union[str, _Op]
"""A parsed ``--constraint``: a feature name, or an operator over constraints."""

_TOKEN = re.compile(r"\s*(?:([A-Za-z0-9_.:/+-]+)(?:\*\d+)?|([&|!()\[\]]))")


def parse_constraint(text: str) -> Constraint:
    """The constraint ``text`` (``avx512&(fast|big)``); ValueError naming the text if it is not one."""
    tokens: list[str] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"constraint {text!r}: cannot read it at {text[pos:pos + 10]!r}")
        tokens.append(m.group(1) or m.group(2))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not tokens:
        raise ValueError("empty constraint")
    tree, rest = _either(tokens, text)
    if rest:
        raise ValueError(f"constraint {text!r}: unexpected {rest[0]!r}")
    return tree


def _either(tokens: list[str], text: str) -> tuple[Constraint, list[str]]:
    return _chain(tokens, text, "|")


def _chain(tokens: list[str], text: str, op: str) -> tuple[Constraint, list[str]]:
    """Operands joined by ``op``: ``|`` joins ``&`` chains, ``&`` joins single operands."""
    step = _one if op == "&" else (lambda t, x: _chain(t, x, "&"))
    left, tokens = step(tokens, text)
    parts = [left]
    while tokens and tokens[0] == op:
        right, tokens = step(tokens[1:], text)
        parts.append(right)
    return (parts[0] if len(parts) == 1 else _Op(op, tuple(parts))), tokens


def _one(tokens: list[str], text: str) -> tuple[Constraint, list[str]]:
    if not tokens:
        raise ValueError(f"constraint {text!r}: ends too early")
    head, rest = tokens[0], tokens[1:]
    if head == "!":
        inner, rest = _one(rest, text)
        return _Op("!", (inner,)), rest
    if head in ("(", "["):
        inner, rest = _either(rest, text)
        close = ")" if head == "(" else "]"
        if not rest or rest[0] != close:
            raise ValueError(f"constraint {text!r}: {head!r} without {close!r}")
        return inner, rest[1:]
    if head in "&|)]":
        raise ValueError(f"constraint {text!r}: unexpected {head!r}")
    return head, rest


def constraint_holds(tree: Constraint, features: frozenset[str]) -> bool:
    """True when a node with ``features`` satisfies ``tree``."""
    if isinstance(tree, str):
        return tree in features
    if tree.op == "&":
        return all(constraint_holds(a, features) for a in tree.args)
    if tree.op == "|":
        return any(constraint_holds(a, features) for a in tree.args)
    return not constraint_holds(tree.args[0], features)


@dataclass(frozen=True, slots=True)
class _Need:
    cpus: int
    ram_mb: int
    gpus: int
    sizes: frozenset[str] | None
    unmatched: str | None


class SlurmMatcher:
    """The sizes that can run each pending job (see the module doc), remembered per (partition,
    constraint, GRES, exclusive): a queue of many alike jobs costs one match."""

    def __init__(self, sizes: Sequence[Size]) -> None:
        self.sizes = tuple(sizes)
        self._partitioned = any(s.partitions for s in self.sizes)
        self._seen: dict[tuple[str, str, str, bool, int, int], _Need] = {}

    def need(self, job: "SlurmJob", cpus: int, ram_mb: int, what: str | None = None) -> _Need:
        """What one node of ``job`` needs (``cpus`` cores and ``ram_mb`` MB per node) and which
        sizes can give it; ``sizes`` None: any size whose cores and memory fit. ``what`` names the
        jobs in an ``unmatched`` text (default ``jobs like <job id>``)."""
        key = (job.partition, job.features, job.gres, job.exclusive, cpus, ram_mb)
        known = self._seen.get(key)
        if known is None:
            known = self._seen[key] = self._match(job, cpus, ram_mb, what or f"jobs like {job.job_id}")
        return known

    def _match(self, job: "SlurmJob", cpus: int, ram_mb: int, what: str) -> _Need:
        gpus, gpu_type, other = parse_gres(job.gres)
        sizes = list(self.sizes)
        asked = False
        why = ""
        parts = frozenset(p for p in job.partition.split(",") if p)
        if parts and self._partitioned:
            asked = True
            sizes = [s for s in sizes if not s.partitions or s.partitions & parts]
            why = why or ("" if sizes else f"no size serves partition {job.partition}")
        if job.features:
            asked = True
            try:
                tree = parse_constraint(job.features)
            except ValueError as exc:
                sizes, why = [], why or str(exc)
            else:
                sizes = [s for s in sizes if constraint_holds(tree, s.features)]
                why = why or ("" if sizes else f"no size has the features {job.features}")
        if gpus or other:
            asked = True
            sizes = [s for s in sizes if s.gpus >= gpus and (not gpu_type or s.gpu_type == gpu_type)
                     and not other]
            kind = f" of type {gpu_type}" if gpu_type else ""
            why = why or ("" if sizes else f"no size has {', '.join(other) or f'{gpus} GPUs{kind}'} per node")
        if job.exclusive:  # a whole node: all the cores of the smallest size that can run it
            fit = [s for s in sizes if s.cores >= cpus and s.ram_mb >= ram_mb]
            if fit:
                least = min(s.cores for s in fit)
                fit = [s for s in fit if s.cores == least]
                # its own memory ask: the cores already fill the node, and a size's full memory
                # would not fit the node's usable share (node_mem_scaling), so nothing would boot
                return _Need(least, ram_mb, gpus, frozenset(s.name for s in fit), None)
            asked, sizes = True, []
            why = why or f"no size has {cpus} cores and {ram_mb} MB for it"
        if not asked:
            return _Need(cpus, ram_mb, gpus, None, None)
        names = frozenset(s.name for s in sizes)
        if names:
            return _Need(cpus, ram_mb, gpus, names, None)
        signature = hashlib.sha1(f"{job.partition}|{job.features}|{job.gres}|{job.exclusive}"
                                 .encode()).hexdigest()[:8]
        return _Need(cpus, ram_mb, gpus, names,
                     f"no size can run {what} (signature {signature}): {why}")
