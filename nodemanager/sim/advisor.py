"""The advisor's pure part: the configurations it tries (each today's configuration file with a
few options changed, as text, so the proposal is the very file that was replayed), the Pareto
front of money against p95 wait, and the proposal.

A point that killed or evicted a job, or left one unfinished, in its replay is never on the front
and never proposed, however cheap."""

from __future__ import annotations

import configparser
import difflib
import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["Change", "Candidate", "Point", "candidates", "edit", "parse_try", "front", "same_as", "propose", "diff"]

IDLE_GRACES = ("60s", "120s", "900s")     # tried beside today's idle_grace


@dataclass(frozen=True, slots=True)
class Change:
    """One option set (``value`` None: the whole ``[section]`` removed, as for a size not offered)."""

    section: str
    option: str
    value: str | None


@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    changes: tuple[Change, ...]
    text: str


@dataclass(frozen=True, slots=True)
class Point:
    """A candidate's replay: ``safe`` when no job was killed, evicted or left unfinished."""

    candidate: Candidate
    money: float
    wait_p95: float
    killed: int
    evicted: int
    unfinished: int

    @property
    def safe(self) -> bool:
        return self.killed == 0 and self.evicted == 0 and self.unfinished == 0

    @property
    def today(self) -> bool:
        return not self.candidate.changes


def _current(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.optionxform = str  # type: ignore[assignment, method-assign]
    cp.read_string(text)
    return cp


def candidates(text: str, tries: Sequence[tuple[Change, ...]] = ()) -> list[Candidate]:
    """Today's configuration first, then each setting that moves cost and waits changed alone:
    ``idle_grace`` (:data:`IDLE_GRACES`), ``idle_grace_mode``, ``consolidate``, the cost profile
    against the default, ``runtime_prediction``, each size left out (with several), the spot
    re-run share (with a spot size); then the ``tries`` asked for."""
    cp = _current(text)

    def get(section: str, option: str, default: str) -> str:
        return cp.get(section, option, fallback=default).strip() if cp.has_section(section) else default

    def flip(option: str, a: str, b: str) -> Change:
        return Change("Daemon", option, b if get("Daemon", option, a) == a else a)

    wanted: list[tuple[Change, ...]] = []
    grace = get("Daemon", "idle_grace", "300s")
    wanted += [(Change("Daemon", "idle_grace", g),) for g in IDLE_GRACES if g != grace]
    wanted.append((flip("idle_grace_mode", "fixed", "break-even"),))
    wanted.append((flip("consolidate", "no", "yes"),))
    wanted.append((Change("Daemon", "profile", "" if get("Daemon", "profile", "") == "cost" else "cost"),))
    wanted.append((flip("runtime_prediction", "off", "recent"),))
    sizes = [s for s in cp.sections() if s.startswith("Size ")]
    if len(sizes) > 1:
        wanted += [(Change(s, "", None),) for s in sizes]
    if any(cp.get(s, "market", fallback="on-demand").strip() == "spot" for s in sizes):
        share = get("Daemon", "max_rerun_share", "")
        wanted += [(Change("Daemon", "max_rerun_share", v),) for v in ("5%", "25%") if v != share]
    out = [Candidate(label="today", changes=(), text=text)]
    for changes in [*wanted, *tries]:
        out.append(Candidate(label="; ".join(_label(c) for c in changes), changes=changes,
                             text=edit(text, changes)))
    return out


def _label(c: Change) -> str:
    if c.value is None:
        return f"without [{c.section}]"
    return f"{c.option} = {c.value}" if c.section == "Daemon" else f"[{c.section}] {c.option} = {c.value}"


def parse_try(spec: str) -> tuple[Change, ...]:
    """``--try "Section:option=value;Section:option=value"``: one candidate; ValueError says why."""
    out = []
    for part in (p.strip() for p in spec.split(";") if p.strip()):
        m = re.match(r"^([^:=]+):([A-Za-z0-9_]+)=(.*)$", part)
        if not m:
            raise ValueError(f"--try {spec!r}: expected Section:option=value (e.g. Daemon:idle_grace=10m)")
        out.append(Change(m.group(1).strip(), m.group(2), m.group(3).strip()))
    if not out:
        raise ValueError(f"--try {spec!r}: no option named")
    return tuple(out)


def edit(text: str, changes: Sequence[Change]) -> str:
    """``text`` with each option set in place (added at the end of its section, or a new section at
    the end) or each removed section gone; comments and the rest left as they are."""
    lines = text.splitlines()
    for c in changes:
        start, end = _section(lines, c.section)
        if c.value is None:
            if start is not None:
                del lines[start:end]
            continue
        if start is None:
            lines += ["", f"[{c.section}]", f"{c.option} = {c.value}"]
            continue
        pattern = re.compile(rf"^\s*{re.escape(c.option)}\s*[=:]")
        at = next((k for k in range(start + 1, end) if pattern.match(lines[k])), None)
        if at is not None:
            lines[at] = f"{c.option} = {c.value}"
        else:
            last = max((k for k in range(start, end) if lines[k].strip()), default=start)
            lines.insert(last + 1, f"{c.option} = {c.value}")
    return "\n".join(lines) + "\n"


def _section(lines: list[str], name: str) -> tuple[int | None, int]:
    """The line of ``[name]`` and the line where its body ends (the next section or the end)."""
    start = None
    for k, line in enumerate(lines):
        head = line.strip()
        if head.startswith("[") and head.endswith("]"):
            if start is not None:
                return start, k
            if head[1:-1].strip() == name:
                start = k
    return start, len(lines)


def front(points: Sequence[Point]) -> list[Point]:
    """The safe points no other safe point dominates (no dearer and no longer p95 wait, and better
    on one), cheapest first; a change that replays exactly as today (the same money and wait) is
    left out: it changes nothing the replay sees."""
    today = next((p for p in points if p.today), None)
    safe = [p for p in points if p.safe and (p.today or today is None or not same_as(p, today))]
    out = [p for p in safe if not any(
        q.money <= p.money and q.wait_p95 <= p.wait_p95 and (q.money < p.money or q.wait_p95 < p.wait_p95)
        for q in safe)]
    return sorted(out, key=lambda p: (p.money, p.wait_p95))


def same_as(p: Point, q: Point) -> bool:
    return p.money == q.money and p.wait_p95 == q.wait_p95


def propose(points: Sequence[Point], wait_slack: float) -> Point | None:
    """The cheapest point of the front whose p95 wait is at most today's plus ``wait_slack``
    seconds and that costs less than today; None when today's configuration is the one to keep."""
    today = next(p for p in points if p.today)
    fits = [p for p in front(points) if not p.today and p.wait_p95 <= today.wait_p95 + wait_slack
            and p.money < today.money]
    return fits[0] if fits else None


def diff(today: str, proposed: Candidate, path: str) -> str:
    """The proposal as a unified diff of the configuration file."""
    return "".join(difflib.unified_diff(today.splitlines(keepends=True), proposed.text.splitlines(keepends=True),
                                        fromfile=path, tofile=f"{path} (proposed)"))
