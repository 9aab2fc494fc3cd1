"""The sizes' side of HTCondor matching: the ad each size's VM will advertise, and why a job
matches none, in words.

:func:`size_ad` builds a size's offline ad. :class:`Refusal` holds them and says which side
refuses a job: too small, the job's Requirements (the clauses no size meets, and for each
attribute they name that is missing the side that lacks it, or that the query left it out), or
the sizes' START. :func:`reachable` reads references from expression text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from nodemanager.classad.expressions import references
from nodemanager.model import Size
from nodemanager.scheduler.htcondor_projection import PER_OWNER, PER_SIGNATURE

__all__ = ["WITHIN_RESOURCE_LIMITS", "classad_module", "size_ad", "Refusal", "reachable"]

# The startd's default WithinResourceLimits (ResAttributes.cpp), with GPUs as its custom resource.
WITHIN_RESOURCE_LIMITS = (
    "MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory"
    " && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
    " && (TARGET.RequestGPUs =?= undefined || MY.GPUs >= TARGET.RequestGPUs)")
# What a Linux x86_64 execute node advertises that condor_submit's default Requirements test.
_PLATFORM = (("OpSys", '"LINUX"'), ("Arch", '"X86_64"'), ("HasFileTransfer", "true"))
# condor_submit requires TARGET.FileSystemDomain == MY.FileSystemDomain of jobs that transfer no files
_SHARED_FS_HINT = ("; a job without file transfer (should_transfer_files = NO) runs only where the "
                   "submit host's file system is mounted: give the sizes whose VMs mount it "
                   "FileSystemDomain (their FILESYSTEM_DOMAIN) in their attributes")
_NO_DISK_KB = 2**40  # a size without scratch_mb: any disk request fits, as the core assumes


def classad_module() -> Any:
    """``classad2``, with HTCondor's configuration loaded."""
    import classad2
    import htcondor2  # noqa: F401 - loads HTCondor's config: unscoped names resolve in the other ad

    return classad2


def size_ad(size: Size, start: str | None = None) -> Any:
    """The ``classad2.ClassAd`` a VM of ``size`` will advertise once booted: its partitionable slot
    with every core, MB, KB of disk and GPU free, a Linux x86_64 platform, the size's
    ``attributes`` (which may override all of it, START included), ``START`` (the site's
    expression, default true) and ``Requirements = START && WithinResourceLimits``."""
    classad2 = classad_module()
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
class Refusal:
    """The sizes' offline ads (name, ad), the startd's WithinResourceLimits as an expression and
    the lower-case names any size's ad defines."""

    ads: tuple[tuple[str, Any], ...]
    limits: Any
    defined: frozenset[str]

    def why(self, job: Any, texts: Mapping[str, str], requests: tuple[int, int, int], gpus: int,
            unfetched: Sequence[str]) -> str:
        """Why no size matches ``job`` (its attribute ``texts``; ``unfetched``: the names the
        query left out), in words: too small, the job's Requirements (naming the side, job or
        sizes, that lacks an attribute they name), or START."""
        roomy = [(n, ad) for n, ad in self.ads if self.limits.eval(ad, job) is True]
        if not roomy:
            cpus, mem, disk_mb = requests
            return (f"it asks for more than any size has ({cpus} cores, {mem} MB memory, {disk_mb} MB "
                    f"disk, {gpus} GPUs)")
        wanted = [n for n, ad in roomy if ad.matches(job)]
        if not wanted:
            req = job.lookup("Requirements")
            undefined = self._missing(texts, unfetched)
            failing = [c for c in _clauses(str(req)) if not any(_holds(c, job, ad) for _, ad in roomy)]
            what = " && ".join(failing) if failing else str(req)
            return f"its Requirements ({_short(what)}) hold on no size with room for it{undefined}"
        return f"START refuses it on {', '.join(wanted)}"

    def _missing(self, texts: Mapping[str, str], unfetched: Sequence[str]) -> str:
        """The attributes the Requirements name that no side defines, each with the side that
        should: the job (``MY.``), the sizes (``TARGET.``), either (unscoped); or not fetched."""
        left_out = {n.lower() for n in unfetched}
        in_job = {k.lower() for k in texts}
        sides: dict[str, list[str]] = {}
        for low, (scope, name) in sorted(reachable(texts).items()):
            if low in left_out:
                side = (f"not fetched from the job (a signature may add {PER_SIGNATURE} job attributes "
                        f"to the query, an owner {PER_OWNER})")
            elif scope == "target" and low not in self.defined:
                side = "no size defines"
            elif scope == "my" and low not in in_job:
                side = "the job does not define"
            elif scope == "" and low not in self.defined and low not in in_job:
                side = "neither the job nor any size defines"
            else:
                continue
            sides.setdefault(side, []).append(name)
        hint = (_SHARED_FS_HINT if any(n.lower() == "filesystemdomain" for side, names in sides.items()
                                       if not side.startswith("not fetched") for n in names) else "")
        return "".join(f"; {', '.join(names)} {side}" if side.startswith("not fetched") else f"; {side} {', '.join(names)}"
                       for side, names in sides.items()) + hint


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def reachable(texts: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Lower-case name -> (scope, name) of every attribute the ``Requirements`` in ``texts`` (an
    ad's attribute texts) name, directly or through the ad's own attributes (linear time)."""
    by_name = {k.lower(): v for k, v in texts.items()}
    found: dict[str, tuple[str, str]] = {}
    todo = [by_name.get("requirements", "")]
    while todo:
        for scope, name in references(todo.pop()):
            low = name.lower()
            if low in found:
                continue
            found[low] = (scope, name)
            if scope != "target" and low in by_name:
                todo.append(by_name[low])
    return found


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
