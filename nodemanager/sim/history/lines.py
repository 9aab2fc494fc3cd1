"""What every history reader shares: bounded, strictly decoded lines; the count of skipped lines
by reason with the first few named by line number; the checks that keep each number in range;
and the window of days and the sort that turn records into the replay's jobs."""

from __future__ import annotations

import gzip
import io
import math
from dataclasses import dataclass, field, replace
from typing import Iterator

from nodemanager.sim.swf import DAY, SwfJob

__all__ = ["MAX_LINE", "NAMED", "MAX_RUNTIME", "MAX_CORES", "MAX_MEM_MB", "MAX_GPUS", "HistoryError",
           "HistoryLog", "Skip", "Record", "Names", "open_bytes", "numbered_lines", "lines_with_holes", "jobs_of", "check_range"]

MAX_LINE = 1024 * 1024            # bytes: a longer line is skipped whole, never held in memory
NAMED = 20                        # skipped lines named by number, per reader
MAX_RUNTIME = 365 * DAY           # a record that ran longer is not a batch job
MAX_CORES = 1_000_000
MAX_MEM_MB = 1_000_000_000        # 1 PB
MAX_GPUS = 100_000


class HistoryError(ValueError):
    """A history that cannot be read at all; the message starts with ``file:line:``."""


class Skip(ValueError):
    """A record that cannot be replayed; its message is the reason it is counted under."""


@dataclass
class HistoryLog:
    """What reading left out or changed: ``skipped`` counts records by reason (the first line of
    each in ``first_skipped_line``), ``named`` the first :data:`NAMED` skipped lines with their
    reason; ``adjusted`` counts records replayed under a stated rule (clock skew, a requeue)."""

    path: str
    skipped: dict[str, int] = field(default_factory=dict)
    first_skipped_line: dict[str, int] = field(default_factory=dict)
    named: list[tuple[int, str]] = field(default_factory=list)
    adjusted: dict[str, int] = field(default_factory=dict)
    records: int = 0

    def skip(self, why: str, line: int, *, name: bool = True) -> None:
        """Count ``line`` under ``why``; ``name`` False for the records every history has (a job's
        steps), which would crowd out the lines worth a look."""
        self.skipped[why] = self.skipped.get(why, 0) + 1
        self.first_skipped_line.setdefault(why, line)
        if name and len(self.named) < NAMED:
            self.named.append((line, why))

    def adjust(self, what: str) -> None:
        self.adjusted[what] = self.adjusted.get(what, 0) + 1

    def notes(self) -> list[str]:
        """One line per reason and rule, then the named lines, as ``simulate`` prints them."""
        out = [f"{self.records} record(s) read from {self.path}"]
        out += [f"{n} record(s) skipped: {why} (first at line {self.first_skipped_line[why]})"
                for why, n in self.skipped.items()]
        out += [f"{n} record(s) replayed under a rule: {what}" for what, n in self.adjusted.items()]
        if self.named:
            out.append("skipped lines: " + ", ".join(f"{self.path}:{line} ({why})" for line, why in self.named)
                       + (" and more" if len(self.named) == NAMED else ""))
        return out


@dataclass(frozen=True, slots=True)
class Record:
    """One job as a history says it ran: Unix seconds; ``limit`` -1 when not known."""

    submit: float
    start: float
    end: float
    cores: int
    mem_mb: int = 0
    gpus: int = 0
    limit: float = -1.0
    user: str = ""
    group: str = ""
    name: str = ""


class Names:
    """Small integer ids for names (users, accounts), in order of first appearance; "" is -1."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def id(self, name: str) -> int:
        if not name:
            return -1
        return self._ids.setdefault(name, len(self._ids))


def open_bytes(path: str) -> io.BufferedIOBase:
    """``path`` for reading bytes, gunzipped when it ends in ``.gz``; HistoryError if it cannot be opened."""
    try:
        return gzip.GzipFile(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as exc:
        raise HistoryError(f"{path}:0: cannot open: {exc}") from None


def numbered_lines(path: str, log: HistoryLog) -> Iterator[tuple[int, str]]:
    """Each non-blank line of ``path`` with its number, decoded as UTF-8, trailing white space
    dropped (leading white space kept: it tells an ad's own braces from nested ones). A line longer than
    :data:`MAX_LINE` bytes or not UTF-8 is skipped and counted; a file that cannot be read raises
    HistoryError naming the line."""
    for lineno, text in lines_with_holes(path, log):
        if text is not None:
            yield lineno, text


def lines_with_holes(path: str, log: HistoryLog) -> Iterator[tuple[int, str | None]]:
    """As :func:`numbered_lines`, with None in place of each line skipped (a record spanning
    lines is broken by one)."""
    lineno = 0
    with open_bytes(path) as fh:
        try:
            while True:
                raw = fh.readline(MAX_LINE + 1)
                if not raw:
                    return
                lineno += 1
                if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                    while (rest := fh.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                        pass
                    log.skip(f"line longer than {MAX_LINE // (1024 * 1024)} MiB", lineno)
                    yield lineno, None
                    continue
                try:
                    text = raw.decode("utf-8").rstrip()
                except UnicodeDecodeError:
                    log.skip("not UTF-8", lineno)
                    yield lineno, None
                    continue
                if text:
                    yield lineno, text
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise HistoryError(f"{path}:{lineno}: cannot read: {exc}") from None


def check_range(record: Record, log: HistoryLog) -> Record:
    """``record`` with its numbers checked against the documented ranges (Skip names the first out
    of range), and a start before the submit (clock skew between the records) taken as the submit."""
    for name, value in (("submit time", record.submit), ("start time", record.start), ("end time", record.end)):
        if not math.isfinite(value) or value <= 0:
            raise Skip(f"{name} not a positive finite number")
    if record.end < record.start:
        raise Skip("ends before it starts")
    if record.end - record.start > MAX_RUNTIME:
        raise Skip("ran longer than 365 days")
    if not 0 < record.cores <= MAX_CORES:
        raise Skip(f"cores outside 1-{MAX_CORES}")
    if not 0 <= record.mem_mb <= MAX_MEM_MB:
        raise Skip(f"memory outside 0-{MAX_MEM_MB} MB")
    if not 0 <= record.gpus <= MAX_GPUS:
        raise Skip(f"GPUs outside 0-{MAX_GPUS}")
    if not (record.limit == -1.0 or (math.isfinite(record.limit) and 0 < record.limit <= MAX_RUNTIME)):
        raise Skip("time limit outside 1 s-365 days")
    if record.start < record.submit:
        log.adjust("started before its submit time (clock skew): submit taken as the start")
        record = replace(record, submit=record.start)
    return record


def jobs_of(records: list[Record], *, skip_days: float = 0.0, days: float | None = None) -> list[SwfJob]:
    """The replay's jobs: ``records`` sorted by submit time, numbered in that order, the window of
    days counted from the first submit (``skip_days`` dropped, ``days`` kept). Submit times stay
    Unix times; users, groups and job names become small ids."""
    if skip_days < 0 or (days is not None and days <= 0):
        raise ValueError("--skip-days must be >= 0 and --days > 0")
    records = sorted(records, key=lambda r: r.submit)
    if not records:
        return []
    start = records[0].submit + skip_days * DAY
    end = start + days * DAY if days is not None else math.inf
    users, groups, names = Names(), Names(), Names()
    out: list[SwfJob] = []
    for r in records:
        if not start <= r.submit < end:
            continue
        out.append(SwfJob(id=len(out) + 1, submit=r.submit, runtime=r.end - r.start, cores=r.cores,
                          mem_mb=r.mem_mb, requested_time=r.limit, trace_wait=r.start - r.submit,
                          user=users.id(r.user), group=groups.id(r.group), executable=names.id(r.name),
                          gpus=r.gpus))
    return out
