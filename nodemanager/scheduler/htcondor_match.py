"""HTCondor matchmaking against sizes not yet booted.

Each :class:`~nodemanager.model.Size` stands for the ad its VM's partitionable slot will advertise
once booted (:func:`size_ad`): its resources all free, what condor_submit's default Requirements
ask of a Linux execute node, the size's own ``attributes``, the site's START and the startd's
``Requirements = START && WithinResourceLimits``. An idle job can use a size when both sides
match, as the negotiator would decide for that offline ad (``classad2`` symmetric match).

Jobs are grouped by signature: the schedd's ``AutoClusterId`` (per schedd, read from
``GlobalJobId``) when it has one, else the significant attributes themselves; one match per
signature and size, and the verdict is remembered across polls, so 100k idle jobs in a few hundred
autoclusters cost a few hundred evaluations once and a dictionary lookup per job after.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from nodemanager.model import Demand, Size
from nodemanager.scheduler.htcondor_ads import JOB_ATTRIBUTES, job_name, job_request
from nodemanager.scheduler.port import SchedulerError
from nodemanager.scheduler.records import RecordProblem
from nodemanager.scheduler.walltime import walltime_bucket

__all__ = ["WALLTIME_ATTRIBUTE", "MATCH_ATTRIBUTES", "WITHIN_RESOURCE_LIMITS", "size_ad", "Verdict", "HTCondorMatcher"]

# What a job ad must carry for matching, beyond the requests JOB_ATTRIBUTES already has.
MATCH_ATTRIBUTES = ("Requirements", "RequestGPUs", "AutoClusterId", "GlobalJobId")
# The startd's default WithinResourceLimits (ResAttributes.cpp), with GPUs as its custom resource.
WITHIN_RESOURCE_LIMITS = (
    "MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory"
    " && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
    " && (TARGET.RequestGPUs =?= undefined || MY.GPUs >= TARGET.RequestGPUs)")
# What a Linux x86_64 execute node advertises that condor_submit's default Requirements test.
_PLATFORM = (("OpSys", '"LINUX"'), ("Arch", '"X86_64"'), ("HasFileTransfer", "true"))
_NO_DISK_KB = 2**40  # a size without scratch_mb: any disk request fits, as the core assumes
# Job attributes that name or date one job: never part of a signature.
_PER_JOB = frozenset(a.lower() for a in ("ClusterId", "ProcId", "QDate", "AutoClusterId",
                                          "GlobalJobId", "AutoClusterAttrs", "JobStatus"))
_REQUESTS = ("RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs")
_PLAIN = frozenset({int, float, str, bool, type(None)})
_PER_JOB_LINE = re.compile(r"^(?:%s) = .*\n?" % "|".join(sorted(_PER_JOB)), re.MULTILINE | re.IGNORECASE)
_CACHE_LIMIT = 50_000  # signatures remembered; past it the memory starts afresh
_MAX_ASKED = 1_000     # job attributes asked for at most: Requirements naming more stay undefined
# condor_submit's allowed_job_duration (seconds; the job is held past it): the requested walltime
WALLTIME_ATTRIBUTE = "AllowedJobDuration"
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _classad() -> Any:
    import classad2
    import htcondor2  # noqa: F401 - loads HTCondor's config: unscoped names resolve in the other ad

    return classad2


def size_ad(size: Size, start: str | None = None) -> Any:
    """The ``classad2.ClassAd`` a VM of ``size`` will advertise once booted: its partitionable slot
    with every core, MB, KB of disk and GPU free, a Linux x86_64 platform, the size's
    ``attributes`` (which may override all of it, START included), ``START`` (the site's
    expression, default true) and ``Requirements = START && WithinResourceLimits``."""
    classad2 = _classad()
    disk = size.scratch_mb * 1024 if size.scratch_mb > 0 else _NO_DISK_KB
    ad = classad2.ClassAd({
        "MyType": "Machine", "Name": f"slot1@{size.name}.offline", "Machine": f"{size.name}.offline",
        "SlotType": "Partitionable", "PartitionableSlot": True,
        "Cpus": size.cores, "TotalCpus": size.cores, "TotalSlotCpus": size.cores,
        "Memory": size.ram_mb, "TotalMemory": size.ram_mb, "TotalSlotMemory": size.ram_mb,
        "Disk": disk, "TotalDisk": disk, "TotalSlotDisk": disk,
        "GPUs": size.gpus, "TotalGPUs": size.gpus, "TotalSlotGPUs": size.gpus,
    })
    if size.gpu_type:
        ad["GPUs_DeviceName"] = size.gpu_type
    assignments = (*_PLATFORM, ("START", start or "true"),
                   ("WithinResourceLimits", WITHIN_RESOURCE_LIMITS),
                   ("Requirements", "START && WithinResourceLimits"), *size.attributes)
    for name, text in assignments:
        try:
            ad[name] = classad2.ExprTree(text)
        except Exception as exc:  # noqa: BLE001 - classad2 raises its own ClassAdException
            raise ValueError(f"size {size.name}: {name} = {text!r} is not a ClassAd expression "
                             f"({exc})") from None
    return ad


@dataclass(frozen=True, slots=True)
class Verdict:
    """The sizes whose offline ad matches one job signature; ``unmatched`` says why none does."""

    sizes: frozenset[str]
    unmatched: str | None = None


@dataclass(slots=True)
class _Group:
    first: Any          # the first job of the group: it stands for all of them
    index: int
    count: int = 0
    oldest: float = 0.0


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _bare(ref: str) -> tuple[str, str]:
    """(scope, name) of a reference like ``TARGET.Cpus``: scope ``my``, ``target`` or ``""``."""
    scope, dot, name = ref.rpartition(".")
    return (scope.lower(), name) if dot else ("", ref)


class HTCondorMatcher:
    """Matches idle jobs to sizes. ``start``: the site's START expression (the execute nodes'
    ``START``; None: true). :attr:`projection` is what the idle-job query must ask for; it grows
    when a job's Requirements name a job attribute it lacks (the adapter then asks again).
    ``walltime``: the job attribute holding its requested walltime in seconds (``Demand.walltime``,
    rounded up to a bucket). Raises ValueError naming the size if an ad cannot be built."""

    def __init__(self, sizes: Sequence[Size], start: str | None = None,
                 walltime: str = WALLTIME_ATTRIBUTE) -> None:
        classad2 = _classad()
        if start is not None and start.strip():
            try:
                classad2.ExprTree(start)
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"[Scheduler] machine_start: {start!r} is not a ClassAd expression "
                                 f"({exc})") from None
        self.sizes = tuple(sizes)
        self._ads = tuple((s.name, size_ad(s, start)) for s in self.sizes)
        self._limits = classad2.ExprTree(WITHIN_RESOURCE_LIMITS)
        self._defined = {k.lower() for _, ad in self._ads for k in ad.keys()}
        if not _ATTRIBUTE_NAME.fullmatch(walltime):
            raise ValueError(f"[Scheduler] walltime_attribute: {walltime!r} is not a ClassAd attribute name")
        self._walltime = walltime
        wanted = {a.lower(): a for a in (*JOB_ATTRIBUTES, *MATCH_ATTRIBUTES)}
        for _, ad in self._ads:  # what the sizes' START and Requirements ask of the job
            for ref in ad.externalRefs(ad.lookup("Requirements")):
                scope, name = _bare(ref)
                if scope in ("target", ""):
                    wanted.setdefault(name.lower(), name)
        # what an autocluster id alone may not tell apart: with no startd in the pool the schedd's
        # signature leaves out what only START (or a 1-core job's missing Cpus clause) asks about
        self._keyed = (*_REQUESTS, *(a for k, a in wanted.items()
                                     if k not in {x.lower() for x in (*JOB_ATTRIBUTES, *MATCH_ATTRIBUTES)}))
        # the walltime splits groups by bucket only, unless a size's START asks about it
        self._walltime_matters = walltime.lower() in wanted
        wanted.setdefault(walltime.lower(), walltime)
        self._asked = wanted
        self._verdicts: dict[str, tuple[str, Verdict]] = {}

    @property
    def projection(self) -> tuple[str, ...]:
        """The attributes the idle-job query must return."""
        return tuple(self._asked.values())

    # ------------------------------------------------------------ demand

    def demand_from(self, query: Callable[[Sequence[str]], Iterable[Mapping[str, Any]]],
                    problems: list[RecordProblem] | None = None) -> tuple[Demand, ...]:
        """:meth:`demand` of the jobs ``query(projection)`` returns; asked again (at most twice)
        while the jobs' Requirements name job attributes the projection lacked."""
        for _ in range(3):
            asked = self.projection
            found: list[RecordProblem] = []
            demand = self.demand(query(asked), found)
            if self.projection == asked:
                break
        if problems is not None:
            problems.extend(found)
        return demand

    def demand(self, jobs: Iterable[Mapping[str, Any]],
               problems: list[RecordProblem] | None = None) -> tuple[Demand, ...]:
        """Idle jobs as demand: one item per (request, matching sizes), and one per signature no
        size can run (``sizes`` empty, ``unmatched`` saying why). Jobs with an unusable request are
        left out (``problems``); an ad that cannot be read at all is a SchedulerError naming it."""
        groups: dict[Any, _Group] = {}
        for i, job in enumerate(jobs):
            try:
                key = self._group_key(job)
                q = job.get("QDate")
            except Exception as exc:  # noqa: BLE001 - hostile data: name the job
                raise SchedulerError(f"job {job_name(job, i)}: cannot read its ad "
                                     f"({type(exc).__name__}: {exc})") from exc
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(job, i)
            g.count += 1
            if type(q) is int and q > 0 and (g.oldest == 0.0 or q < g.oldest):
                g.oldest = float(q)
        items: dict[tuple[Any, ...], list[float]] = {}
        for g in groups.values():
            req = job_request(g.first, g.index)
            if isinstance(req, RecordProblem):
                if problems is not None:
                    more = f" (and {g.count - 1} more jobs like it)" if g.count > 1 else ""
                    problems.append(RecordProblem(req.kind, req.name, req.field, req.problem + more, req.reason))
                continue
            cpus, mem, disk_mb, _ = req
            gpus = self._gpus(g.first)
            name = job_name(g.first, g.index)
            try:
                _, verdict = self._verdict(g.first, f"jobs like {name}", req[:3], gpus)
            except ValueError as exc:  # a plain dict's Requirements text (the bindings' never fails)
                if problems is not None:
                    problems.append(RecordProblem("job", name, "Requirements",
                                                  f"{exc}; the job is left out of demand", "unreadable"))
                continue
            # demand no size can run is one item per signature, whatever its walltimes
            key = (cpus, mem, disk_mb, gpus, verdict.sizes, verdict.unmatched,
                   walltime_bucket(_seconds(g.first, self._walltime)) if verdict.unmatched is None else None)
            acc = items.setdefault(key, [0, 0.0])
            acc[0] += g.count
            if g.oldest and (not acc[1] or g.oldest < acc[1]):
                acc[1] = g.oldest
        out = [Demand(cpus=c, ram_mb=m, count=int(n), scratch_mb=d, oldest_submit=o or None, gpus=gp,
                      sizes=sz, unmatched=why, walltime=wt)
               for (c, m, d, gp, sz, why, wt), (n, o) in items.items()]
        out.sort(key=lambda d: (-d.count, d.cpus, d.ram_mb, d.gpus, sorted(d.sizes or ()), d.walltime or 0.0))
        return tuple(out)

    def _group_key(self, job: Mapping[str, Any]) -> Any:
        """The schedd's autocluster (per schedd) with the requests and what the sizes' side asks
        of the job, when it has one; else its attributes less those that name or date one job
        (a job the schedd has not negotiated for yet)."""
        ac = job.get("AutoClusterId")
        if type(ac) is int:
            gid = job.get("GlobalJobId")
            values = tuple(map(job.get, self._keyed))
            return ("ac", gid.split("#", 1)[0] if isinstance(gid, str) else "", ac,
                    walltime_bucket(_seconds(job, self._walltime)),
                    *(v if type(v) in _PLAIN else str(v) for v in values))
        printed = getattr(job, "printOld", None)
        if printed is not None:  # a ClassAd: printing it is the cheapest full view (~4 us)
            return ("ad", _PER_JOB_LINE.sub("", printed()))
        return ("ad", tuple(sorted((k.lower(), str(v)) for k, v in job.items() if k.lower() not in _PER_JOB)))

    @staticmethod
    def _gpus(job: Mapping[str, Any]) -> int:
        v = _seconds(job, "RequestGPUs")
        return int(v) if v is not None and v < 2**31 else 0

    # ------------------------------------------------------------ one signature

    def _job_ad(self, job: Mapping[str, Any], requests: tuple[int, int, int], gpus: int) -> tuple[Any, str]:
        """The job's ad as the negotiator sees it (its significant attributes, the requests as
        numbers) and its printed form, the signature's text."""
        classad2 = _classad()
        ad = classad2.ClassAd()
        for key in job.keys():
            if key.lower() in _PER_JOB:
                continue
            value = job.lookup(key) if isinstance(job, classad2.ClassAd) else job[key]
            if key.lower() == "requirements" and isinstance(value, str):
                from nodemanager.classad.expressions import parse
                value = parse(value)  # a plain dict's Requirements is expression text
            if value is not None:
                ad[key] = value
        cpus, mem, disk_mb = requests
        ad.update({"RequestCpus": cpus, "RequestMemory": mem, "RequestDisk": disk_mb * 1024})
        if gpus:
            ad["RequestGPUs"] = gpus
        if "Requirements" not in ad:
            ad["Requirements"] = classad2.ExprTree("true")  # only test pools have jobs without one
        # a walltime no Requirements asks about is no part of the signature: one per kind of job
        skip = self._walltime.lower() if self._walltime in ad and not self._walltime_matters and all(
            _bare(r)[1].lower() != self._walltime.lower() for r in ad.internalRefs(ad.lookup("Requirements"))) else ""
        text = "; ".join(f"{k} = {ad.lookup(k)}" for k in sorted(ad.keys(), key=str.lower) if k.lower() != skip)
        return ad, text

    def verdict(self, job: Mapping[str, Any], what: str, requests: tuple[int, int, int],
                gpus: int = 0) -> Verdict:
        """The sizes that can run ``job`` (an ad, or a dict whose ``Requirements`` is expression
        text) asking ``requests`` (cores, MB, disk MB) and ``gpus``; ``what`` names it in the
        ``unmatched`` text. Raises ValueError if its Requirements do not parse."""
        return self._verdict(job, what, requests, gpus)[1]

    def _verdict(self, job: Mapping[str, Any], what: str, requests: tuple[int, int, int],
                 gpus: int) -> tuple[str, Verdict]:
        ad, text = self._job_ad(job, requests, gpus)
        known = self._verdicts.get(text)
        if known is not None:
            return known
        self._learn(ad)
        signature = hashlib.sha1(text.encode()).hexdigest()[:8]
        sizes = frozenset(name for name, size in self._ads if size.symmetricMatch(ad))
        why = None if sizes else (f"no size can run {what} (signature {signature}): "
                                  f"{self._why(ad, requests, gpus)}")
        if len(self._verdicts) >= _CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[text] = (signature, Verdict(sizes, why))
        return self._verdicts[text]

    def _learn(self, ad: Any) -> None:
        """Ask for the job attributes its Requirements name that the projection lacks."""
        req = ad.lookup("Requirements")
        for ref in (*ad.externalRefs(req), *ad.internalRefs(req)):
            scope, name = _bare(ref)
            if scope != "target" and name and len(self._asked) < _MAX_ASKED:
                self._asked.setdefault(name.lower(), name)

    def _why(self, job: Any, requests: tuple[int, int, int], gpus: int) -> str:
        """Why no size matches, in words: too small, the job's Requirements, or START."""
        roomy = [(n, ad) for n, ad in self._ads if self._limits.eval(ad, job) is True]
        if not roomy:
            cpus, mem, disk_mb = requests
            return (f"it asks for more than any size has ({cpus} cores, {mem} MB memory, {disk_mb} MB "
                    f"disk, {gpus} GPUs)")
        wanted = [n for n, ad in roomy if ad.matches(job)]
        if not wanted:
            req = job.lookup("Requirements")
            missing = sorted({_bare(r)[1] for r in job.externalRefs(req)
                              if _bare(r)[0] != "my" and _bare(r)[1].lower() not in self._defined})
            undefined = f"; no size defines {', '.join(missing)}" if missing else ""
            failing = [c for c in _clauses(str(req)) if not any(_holds(c, job, ad) for _, ad in roomy)]
            what = " && ".join(failing) if failing else str(req)
            return f"its Requirements ({_short(what)}) hold on no size with room for it{undefined}"
        return f"START refuses it on {', '.join(wanted)}"


def _holds(clause: str, job: Any, machine: Any) -> bool:
    import classad2

    try:
        return classad2.ExprTree(clause).eval(job, machine) is True
    except Exception:  # noqa: BLE001 - a clause cut badly: not the one to name
        return True


def _clauses(text: str) -> list[str]:
    """The top-level ``&&`` clauses of expression ``text`` (outer parentheses dropped), so the
    clause that holds on no size can be named rather than condor_submit's whole default."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    parts, depth, start, quoted, i = [], 0, 0, False, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith("&&", i):
            parts.append(text[start:i])
            start = i + 2
            i += 1
        i += 1
    if not parts:
        return [text]
    parts.append(text[start:])
    return [c for p in parts for c in _clauses(p)]


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def _evaluated(job: Mapping[str, Any], key: str) -> Any:
    """``key`` of ``job`` evaluated in the job's own scope (an expression like ``RequestGPUs = 1 + 0``)."""
    import classad2

    if isinstance(job, classad2.ClassAd):
        try:
            return job.eval(key)
        except Exception:  # noqa: BLE001 - absent or unreadable: no GPUs asked for
            return None
    v = job.get(key)
    return v.eval() if isinstance(v, classad2.ExprTree) else v


def _seconds(job: Mapping[str, Any], key: str) -> float | None:
    """A positive number in ``job[key]`` (seconds, a count; evaluated if an expression); else None."""
    v = job.get(key)
    if v is None:
        return None  # absent: the common case, checked first (this runs per job)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        v = _evaluated(job, key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None
