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

What the idle-job query asks for is rebuilt from the queue at every poll, within per-signature
and per-owner bounds (:mod:`.htcondor_projection`). Matching is bounded the way the negotiator
bounds its cycle: an ad whose expressions would expand past :data:`MAX_EXPANDED` characters is
never evaluated, a signature whose evaluation takes longer than ``signature_budget`` is
remembered as too costly, and once a poll has spent ``poll_budget`` the signatures not matched
yet wait for the next poll. Each is demand no size can run, with the reason.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from nodemanager.classad.expressions import expanded_size
from nodemanager.model import Demand, Size
from nodemanager.scheduler.htcondor_ads import JOB_ATTRIBUTES, job_name, job_owner, job_request
from nodemanager.scheduler.htcondor_projection import Wanted, grant
from nodemanager.scheduler.htcondor_sizes import (WITHIN_RESOURCE_LIMITS, Refusal, classad_module, reachable,
                                                  size_ad)
from nodemanager.scheduler.port import SchedulerError
from nodemanager.scheduler.records import RecordProblem
from nodemanager.core.walltime import walltime_bucket

__all__ = ["WALLTIME_ATTRIBUTE", "MATCH_ATTRIBUTES", "WITHIN_RESOURCE_LIMITS", "MAX_EXPANDED", "POLL_BUDGET",
           "SIGNATURE_BUDGET", "size_ad", "Verdict", "HTCondorMatcher"]

# What a job ad must carry for matching, beyond the requests JOB_ATTRIBUTES already has.
MATCH_ATTRIBUTES = ("Requirements", "RequestGPUs", "AutoClusterId", "GlobalJobId")
# Job attributes that name or date one job: never part of a signature.
_PER_JOB = frozenset(a.lower() for a in ("ClusterId", "ProcId", "QDate", "AutoClusterId",
                                          "GlobalJobId", "AutoClusterAttrs", "JobStatus"))
_REQUESTS = ("RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs")
_PLAIN = frozenset({int, float, str, bool, type(None)})
_PER_JOB_LINE = re.compile(r"^(?:%s) = .*\n?" % "|".join(sorted(_PER_JOB)), re.MULTILINE | re.IGNORECASE)
_CACHE_LIMIT = 50_000  # signatures remembered; past it the memory starts afresh
# characters a job ad's expressions may expand to (references written out): ~10 ms per evaluation
MAX_EXPANDED = 100_000
POLL_BUDGET = 5.0        # seconds of matching per poll
SIGNATURE_BUDGET = 1.0   # seconds of matching one signature may take before it counts as too costly
# condor_submit's allowed_job_duration (seconds; the job is held past it): the requested walltime
WALLTIME_ATTRIBUTE = "AllowedJobDuration"
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    texts: dict[str, str] | None = None   # the first job's attributes as expression text


def _texts(job: Mapping[str, Any]) -> dict[str, str]:
    """Every attribute of ``job`` (an ad or a dict) as expression text (linear in its size)."""
    lookup = getattr(job, "lookup", None)
    if lookup is not None and getattr(job, "printOld", None) is not None:
        return {k: str(lookup(k)) for k in job.keys()}
    return {k: str(v) for k, v in job.items()}


def _signature(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _plain_count(job: Mapping[str, Any], key: str, default: int) -> int:
    v = job.get(key)
    return v if type(v) is int and 0 <= v < 2**31 else default


def _bare(ref: str) -> tuple[str, str]:
    """(scope, name) of a reference like ``TARGET.Cpus``: scope ``my``, ``target`` or ``""``."""
    scope, dot, name = ref.rpartition(".")
    return (scope.lower(), name) if dot else ("", ref)


class HTCondorMatcher:
    """Matches idle jobs to sizes. ``start``: the site's START expression (the execute nodes'
    ``START``; None: true). :attr:`projection` is what the idle-job query must ask for; it grows
    from the queue at every poll: what matching always needs and what the queued jobs'
    Requirements name, within per-signature and per-owner bounds (the adapter asks again when it
    grew). ``walltime``: the job attribute holding its requested walltime in seconds
    (``Demand.walltime``, rounded up to a bucket). ``clock`` (monotonic seconds),
    ``poll_budget`` and ``signature_budget`` bound the time matching takes (module doc).
    Raises ValueError naming the size if an ad cannot be built."""

    def __init__(self, sizes: Sequence[Size], start: str | None = None,
                 walltime: str = WALLTIME_ATTRIBUTE, *, clock: Callable[[], float] = time.monotonic,
                 poll_budget: float = POLL_BUDGET, signature_budget: float = SIGNATURE_BUDGET,
                 by_owner: bool = False) -> None:
        classad2 = classad_module()
        self.by_owner = by_owner  # runtime prediction: demand also grouped by Owner
        if start is not None and start.strip():
            try:
                classad2.ExprTree(start)
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"[Scheduler] machine_start: {start!r} is not a ClassAd expression "
                                 f"({exc})") from None
        self.sizes = tuple(sizes)
        self._ads = tuple((s.name, size_ad(s, start)) for s in self.sizes)
        self._defined = frozenset(k.lower() for _, ad in self._ads for k in ad.keys())
        self._refusal = Refusal(self._ads, classad2.ExprTree(WITHIN_RESOURCE_LIMITS), self._defined)
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
        self._keyed += ("Owner",) if by_owner else ()
        # the walltime splits groups by bucket only, unless a size's START asks about it
        self._walltime_matters = walltime.lower() in wanted
        wanted.setdefault(walltime.lower(), walltime)
        wanted.setdefault("owner", "Owner")  # whose quota a job's own names count against
        self._base = dict(wanted)
        self._asked = wanted
        self._verdicts: dict[str, tuple[str, Verdict]] = {}
        self._known_facts: dict[str, tuple[tuple[str, ...], bool]] = {}
        self._clock = clock
        self._poll_budget = poll_budget
        self._signature_budget = signature_budget
        self._deadline: float | None = None   # while a poll matches: when its budget runs out
        self._spent = False                   # ... and whether it has run out

    @property
    def projection(self) -> tuple[str, ...]:
        """The attributes the idle-job query must return."""
        return tuple(self._asked.values())

    # ------------------------------------------------------------ demand

    def demand_from(self, query: Callable[[Sequence[str]], Iterable[Mapping[str, Any]]],
                    problems: list[RecordProblem] | None = None) -> tuple[Demand, ...]:
        """:meth:`demand` of the jobs ``query(projection)`` returns; asked again (at most twice)
        while the jobs' Requirements name job attributes the projection lacked. A name the
        bounds leave out is reported as not fetched in the ``unmatched`` text."""
        for _ in range(3):
            asked = self.projection
            groups = self._groups(query(asked))
            self._regrant(groups)
            if set(self._asked) <= {a.lower() for a in asked}:
                break
        return self._demand(groups, problems, frozenset(a.lower() for a in asked))

    def demand(self, jobs: Iterable[Mapping[str, Any]],
               problems: list[RecordProblem] | None = None) -> tuple[Demand, ...]:
        """Idle jobs as demand: one item per (request, matching sizes), and one per signature no
        size can run (``sizes`` empty, ``unmatched`` saying why). Jobs with an unusable request are
        left out (``problems``); an ad that cannot be read at all is a SchedulerError naming it.
        The projection is rebuilt from these jobs' Requirements."""
        groups = self._groups(jobs)
        self._regrant(groups)
        return self._demand(groups, problems, None)

    def _groups(self, jobs: Iterable[Mapping[str, Any]]) -> list[_Group]:
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
        return list(groups.values())

    def _regrant(self, groups: Sequence[_Group]) -> None:
        """Rebuild the projection from what the groups' Requirements name (module doc)."""
        wanted = []
        for g in groups:
            g.texts = _texts(g.first)
            names = self._facts(g.texts)[0]
            if names:
                owner = g.first.get("Owner")
                wanted.append(Wanted(owner if isinstance(owner, str) else "", g.count, names))
        self._asked = grant(self._base, wanted)

    def _facts(self, texts: Mapping[str, str]) -> tuple[tuple[str, ...], bool]:
        """Of an ad's attribute texts: the job attributes its Requirements name (through the
        job's own attributes too) beyond what is always asked for, sorted, not those only sizes
        define; and whether it is too costly to evaluate. Remembered per text."""
        key = "\n".join(f"{k} = {v}" for k, v in texts.items() if k.lower() not in _PER_JOB)
        known = self._known_facts.get(key)
        if known is None:
            names = tuple(sorted({name for low, (scope, name) in reachable(texts).items()
                                  if scope != "target" and low not in self._base
                                  and (scope == "my" or low not in self._defined)}, key=str.lower))
            if len(self._known_facts) >= _CACHE_LIMIT:
                self._known_facts.clear()
            known = self._known_facts[key] = (names, expanded_size(texts, MAX_EXPANDED) > MAX_EXPANDED)
        return known

    def _demand(self, groups: Sequence[_Group], problems: list[RecordProblem] | None,
                fetched: frozenset[str] | None) -> tuple[Demand, ...]:
        """Demand of ``groups``; ``fetched``: the lower-case names the query asked for (None: the
        jobs are whole)."""
        self._deadline, self._spent = self._clock() + self._poll_budget, False
        try:
            return self._items(groups, problems, fetched)
        finally:
            self._deadline = None

    def _items(self, groups: Sequence[_Group], problems: list[RecordProblem] | None,
               fetched: frozenset[str] | None) -> tuple[Demand, ...]:
        items: dict[tuple[Any, ...], list[float]] = {}
        for g in groups:
            texts = g.texts if g.texts is not None else _texts(g.first)
            if self._facts(texts)[1]:  # not even its requests are read
                sig = _signature("; ".join(f"{k} = {v}" for k, v in sorted(texts.items()) if k.lower() not in _PER_JOB))
                why = f"no size can run jobs like {job_name(g.first, g.index)} (signature {sig}): {_too_costly()}"
                acc = items.setdefault((_plain_count(g.first, "RequestCpus", 1),
                                        _plain_count(g.first, "RequestMemory", 0), 0, 0, frozenset(), why, None,
                                        None),
                                       [0, 0.0])
                acc[0] += g.count
                acc[1] = min(acc[1] or g.oldest, g.oldest or acc[1])
                continue
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
                _, verdict = self._verdict(g.first, f"jobs like {name}", req[:3], gpus, fetched)
            except ValueError as exc:  # a plain dict's Requirements text (the bindings' never fails)
                if problems is not None:
                    problems.append(RecordProblem("job", name, "Requirements",
                                                  f"{exc}; the job is left out of demand", "unreadable"))
                continue
            # demand no size can run is one item per signature, whatever its walltimes
            key = (cpus, mem, disk_mb, gpus, verdict.sizes, verdict.unmatched,
                   walltime_bucket(_seconds(g.first, self._walltime)) if verdict.unmatched is None else None,
                   job_owner(g.first) if self.by_owner else None)
            acc = items.setdefault(key, [0, 0.0])
            acc[0] += g.count
            if g.oldest and (not acc[1] or g.oldest < acc[1]):
                acc[1] = g.oldest
        out = [Demand(cpus=c, ram_mb=m, count=int(n), scratch_mb=d, oldest_submit=o or None, gpus=gp,
                      sizes=sz, unmatched=why, walltime=wt, user=owner)
               for (c, m, d, gp, sz, why, wt, owner), (n, o) in items.items()]
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

    def _job_ad(self, job: Mapping[str, Any], requests: tuple[int, int, int],
                gpus: int) -> tuple[Any, str, dict[str, str]]:
        """The job's ad as the negotiator sees it (its significant attributes, the requests as
        numbers), its printed form (the signature's text) and each attribute's text."""
        classad2 = classad_module()
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
        texts = {k: str(ad.lookup(k)) for k in sorted(ad.keys(), key=str.lower)}
        # a walltime no Requirements asks about is no part of the signature: one per kind of job
        skip = self._walltime.lower() if self._walltime in ad and not self._walltime_matters and \
            self._walltime.lower() not in reachable(texts) else ""
        text = "; ".join(f"{k} = {v}" for k, v in texts.items() if k.lower() != skip)
        return ad, text, texts

    def verdict(self, job: Mapping[str, Any], what: str, requests: tuple[int, int, int],
                gpus: int = 0) -> Verdict:
        """The sizes that can run ``job`` (an ad, or a dict whose ``Requirements`` is expression
        text) asking ``requests`` (cores, MB, disk MB) and ``gpus``; ``what`` names it in the
        ``unmatched`` text. Raises ValueError if its Requirements do not parse."""
        return self._verdict(job, what, requests, gpus, None)[1]

    def _verdict(self, job: Mapping[str, Any], what: str, requests: tuple[int, int, int],
                 gpus: int, fetched: frozenset[str] | None) -> tuple[str, Verdict]:
        """The verdict of ``job``'s signature, remembered; ``fetched``: the names the query asked
        for (None: the job is whole), so a name left out is told apart from one the job lacks."""
        ad, text, texts = self._job_ad(job, requests, gpus)
        signature = _signature(text)
        names, costly = self._facts(texts)
        if costly:
            return signature, Verdict(frozenset(), f"no size can run {what} (signature {signature}): {_too_costly()}")
        unfetched = () if fetched is None else tuple(n for n in names if n.lower() not in fetched)
        key = f"{text}\n{','.join(unfetched)}" if unfetched else text
        known = self._verdicts.get(key)
        if known is not None:
            return known
        if self._deadline is not None and self._spent:  # not remembered: the next poll goes on
            return signature, Verdict(frozenset(), f"no size can run {what} (signature {signature}): not "
                                      f"matched yet: this poll's matching time ({self._poll_budget:g}s) is spent")
        start = self._clock()
        sizes = frozenset(name for name, size in self._ads if size.symmetricMatch(ad))
        why = None if sizes else (f"no size can run {what} (signature {signature}): "
                                  f"{self._refusal.why(ad, texts, requests, gpus, unfetched)}")
        end = self._clock()
        took = end - start
        self._spent = self._deadline is not None and end > self._deadline
        if took > self._signature_budget:
            sizes, why = frozenset(), (f"no size can run {what} (signature {signature}): "
                                       f"{_too_costly(f'matching it took {took:.1f}s, over {self._signature_budget:g}s')}")
        if len(self._verdicts) >= _CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[key] = (signature, Verdict(sizes, why))
        return self._verdicts[key]


def _too_costly(detail: str = f"its expressions would expand past {MAX_EXPANDED:,} characters") -> str:
    return f"too costly to evaluate ({detail})"


def _evaluated(job: Mapping[str, Any], key: str) -> Any:
    """``key`` of ``job`` evaluated in the job's own scope (an expression like ``RequestGPUs = 1 + 0``)."""
    import classad2

    if isinstance(job, classad2.ClassAd):
        if expanded_size(_texts(job), MAX_EXPANDED) > MAX_EXPANDED:
            return None  # too costly to evaluate: as if absent
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
