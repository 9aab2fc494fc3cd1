"""SLURM's part of ``nodemanager check``: what the running slurmctld's configuration
(``scontrol show config``) and node declarations (``scontrol -F show node``, FUTURE nodes
included) must carry for the node manager, and what in them works against it
(docs/slurm.md, "What slurm.conf needs")."""

from __future__ import annotations

import os
import pwd
from typing import AbstractSet, Iterator, Mapping, Sequence

from nodemanager.preflight.checklist import Check
from nodemanager.configuration.settings import Settings
from nodemanager.model import Size
from nodemanager.scheduler.port import SchedulerError
from nodemanager.scheduler.slurm_commands import run_command
from nodemanager.scheduler.slurm_hostlist import expand_hostlist
from nodemanager.scheduler.slurm_options import SlurmOptions
from nodemanager.scheduler.slurm_show import listed, parse_config, parse_records

__all__ = ["slurm_checks", "conf_checks", "node_checks", "node_names", "rights_check"]

Nodes = Mapping[str, Mapping[str, str]]

_RESTART = "then `scontrol reconfigure` (or restart slurmctld)"


def kind_checks(settings: Settings, polled: bool, scripts: Mapping[str, str]) -> Iterator[Check]:
    """The SLURM kind's checks for ``nodemanager check`` (:attr:`SchedulerKind.preflight
    <nodemanager.configuration.kinds.SchedulerKind>`): after a poll that went through, the running
    slurmctld's configuration and node declarations."""
    if not polled:
        return iter(())
    from nodemanager.preflight.boot import uses_conf_server
    # built (and so checked) with the scheduler port before the poll
    return slurm_checks(settings, SlurmOptions.from_mapping(settings.scheduler.options),
                        uses_conf_server(dict(scripts)))


def slurm_checks(settings: Settings, options: SlurmOptions, configless: bool) -> Iterator[Check]:
    """The slurm.conf and node checks against the running slurmctld (``configless``: a boot
    script starts slurmd with ``--conf-server``)."""
    try:
        conf = parse_config(run_command(options, ["scontrol", "show", "config"]))
        nodes = parse_records(run_command(options, ["scontrol", "-F", "-o", "show", "node"]))
        partitions = parse_records(run_command(options, ["scontrol", "-o", "show", "partition"]),
                                   "PartitionName")
    except SchedulerError as exc:
        yield Check("slurm.conf", False, str(exc), "check [Scheduler] slurm_conf and that slurmctld answers")
        return
    yield rights_check(conf, options)
    names = node_names(settings)
    lln = {p for p, fields in partitions.items() if fields.get("LLN", "").upper() == "YES"}
    yield from conf_checks(conf, nodes, [n for ns in names.values() for n in ns if n in nodes],
                           configless=configless, mark_destroyed=options.mark_destroyed, lln=lln)
    yield from node_checks(settings.core.sizes, names, nodes, settings.core.node_mem_scaling,
                           settings.cloud.node_name_template)


def rights_check(conf: Mapping[str, str], options: SlurmOptions, user: str | None = None) -> Check:
    """Whether ``user`` (default: this process's) may drain and resume nodes: SLURM lets root,
    its SlurmUser and users of AdminLevel Operator or Administrator (in slurmdbd) do so."""
    name = user or pwd.getpwuid(os.geteuid()).pw_name
    check = "slurm rights to drain and resume"
    slurm_user = conf.get("SlurmUser", "").split("(", 1)[0]
    if name in ("root", slurm_user):
        return Check(check, True, f"{name} is {'root' if name == 'root' else 'SlurmUser'}")
    fix_user = (f"run the daemon as SlurmUser ({slurm_user}) or root" if slurm_user not in ("", "root")
                else "run the daemon as root (SlurmUser)")
    if "slurmdbd" not in conf.get("AccountingStorageType", ""):
        return Check(check, False, f"{name} is neither root nor SlurmUser ({slurm_user or 'unset'}), and "
                     f"without slurmdbd (AccountingStorageType={conf.get('AccountingStorageType') or 'unset'}) "
                     "SLURM gives no other user an admin level: every drain fails with "
                     "'slurm_update error: Invalid user id' and idle VMs stay paid",
                     f"{fix_user} (User= in the systemd unit), or set up slurmdbd and run "
                     f"`sacctmgr modify user {name} set AdminLevel=Operator`")
    try:
        out = run_command(options, ["sacctmgr", "-n", "-P", "show", "user", name, "format=User,AdminLevel"])
    except SchedulerError as exc:
        return Check(check, None, f"{name}: cannot read its AdminLevel: {exc}",
                     f"check that `sacctmgr show user {name}` answers as this user")
    level = next((line.split("|")[1].strip() for line in out.splitlines()
                  if line.split("|")[0].strip() == name and "|" in line), "")
    if level.lower() in ("operator", "administrator", "admin"):
        return Check(check, True, f"{name} has AdminLevel={level}")
    known = "" if level else " (no SLURM user of that name)"
    return Check(check, False, f"{name} has AdminLevel={level or 'None'}{known}: every drain fails with "
                 "'slurm_update error: Invalid user id' and idle VMs stay paid",
                 f"`sacctmgr modify user {name} set AdminLevel=Operator` (or add the user first: "
                 f"`sacctmgr add user {name} account=<account> AdminLevel=Operator`), or {fix_user}")


def node_names(settings: Settings) -> dict[str, list[str]]:
    """Size name -> every node name the node manager may give its VMs (``{seq}`` 1 to the size's
    ``max_nodes``, else ``[Daemon] max_nodes``)."""
    cloud = settings.cloud
    return {s.name: [cloud.node_name_template.format(cluster=cloud.cluster, size=s.name, seq=i)
                     for i in range(1, (s.max_nodes or settings.core.max_nodes) + 1)]
            for s in settings.core.sizes}


def conf_checks(conf: Mapping[str, str], nodes: Nodes, ours: Sequence[str], *, configless: bool,
                mark_destroyed: str, lln: AbstractSet[str] = frozenset()) -> Iterator[Check]:
    """The settings the node manager needs, and the packing settings that work against it.
    ``ours``: the declared names of the node manager's nodes; ``lln``: partitions with LLN=YES."""
    yield _suspend(conf, nodes, ours)
    rts = conf.get("ReturnToService", "")
    if rts == "2" or (rts == "1" and mark_destroyed == "future"):
        yield Check("slurm.conf ReturnToService", True, f"{rts}: a new VM under a recycled name joins idle")
    else:
        yield Check("slurm.conf ReturnToService", False,
                    f"{rts or 'unset'}: a new VM under the name of a node that was marked down stays "
                    "down when its slurmd registers", f"set ReturnToService=2, {_RESTART}")
    params = conf.get("SlurmctldParameters", "")
    have = listed(params)
    need = {"cloud_dns": "VMs change addresses: slurmctld resolves each node's name when it connects"}
    if configless:
        need["enable_configless"] = "the boot script starts slurmd with --conf-server"
    missing = [word for word in need if word not in have]
    if missing:
        yield Check("slurm.conf SlurmctldParameters", False,
                    f"{params or '(none)'}: lacks {', '.join(missing)} ("
                    + "; ".join(f"{w}: {need[w]}" for w in missing) + ")",
                    f"add {','.join(missing)} to your existing SlurmctldParameters (a comma list), {_RESTART}")
    else:
        yield Check("slurm.conf SlurmctldParameters", True, f"{params}: has {', '.join(need)}")
    comm = conf.get("CommunicationParameters", "")
    if "noaddrcache" in listed(comm):
        yield Check("slurm.conf CommunicationParameters", True, f"{comm}: has NoAddrCache")
    else:
        yield Check("slurm.conf CommunicationParameters", None,
                    f"{comm or '(none)'}: lacks NoAddrCache, so a new VM under a recycled name may be "
                    "reached at its old address", f"add NoAddrCache to your existing CommunicationParameters, {_RESTART}")
    conflicts = []
    if "cr_lln" in listed(conf.get("SelectTypeParameters", "")):
        conflicts.append("SelectTypeParameters has CR_LLN (jobs spread over the least loaded nodes)")
    if "pack_serial_at_end" in listed(conf.get("SchedulerParameters", "")):
        conflicts.append("SchedulerParameters has pack_serial_at_end (serial jobs go to the last "
                         "nodes, not the best fit)")
    spread = sorted({p for n in ours for p in _partitions(nodes, n) if p in lln})
    if spread:
        conflicts.append(f"partition {', '.join(spread)} has LLN=YES (as CR_LLN, for its nodes)")
    if conflicts:
        yield Check("slurm.conf packing", None, "; ".join(conflicts) + "; so fewer nodes go idle "
                    "to be removed, and the pool costs more", f"remove them, {_RESTART} (docs/slurm.md)")
    else:
        yield Check("slurm.conf packing", True, "no CR_LLN, no pack_serial_at_end: jobs fill nodes")


def _suspend(conf: Mapping[str, str], nodes: Nodes, ours: Sequence[str]) -> Check:
    time = conf.get("SuspendTime", "")
    if time.upper() in ("", "NONE", "INFINITE") or time.startswith("-1"):
        return Check("slurm.conf SuspendTime", True, f"{time or 'unset'}: SLURM never powers nodes down itself")
    try:
        excluded = set(expand_hostlist(",".join(h.rsplit(":", 1)[0] for h in
                                                 conf.get("SuspendExcNodes", "").split(","))))
    except ValueError:
        excluded = set()
    parts = set(listed(conf.get("SuspendExcParts", "")))
    left = [n for n in ours if n not in excluded and not {p.lower() for p in _partitions(nodes, n)} & parts]
    if not left:
        return Check("slurm.conf SuspendTime", True, f"{time}, and SuspendExcNodes/SuspendExcParts "
                                                     "exclude the node manager's nodes")
    return Check("slurm.conf SuspendTime", False,
                 f"{time}: SLURM powers idle nodes down itself, and {len(left)} of the node manager's "
                 f"nodes are not excluded (e.g. {left[0]})",
                 f"set SuspendTime=INFINITE, or add the node manager's nodes to SuspendExcNodes, {_RESTART}")


def _partitions(nodes: Nodes, name: str) -> list[str]:
    return [p for p in nodes.get(name, {}).get("Partitions", "").split(",") if p]


def node_checks(sizes: Sequence[Size], names: Mapping[str, Sequence[str]], nodes: Nodes,
                mem_scaling: float, template: str) -> Iterator[Check]:
    """Each size: SLURM declares every name the node manager may give its VMs, with the size's
    cores and with memory between the size's usable share and its whole."""
    for size in sizes:
        wanted = names.get(size.name, ())
        missing = [n for n in wanted if n not in nodes]
        if missing:
            known = len(wanted) - len(missing)
            yield Check(f"slurm nodes of size {size.name}", False,
                        f"SLURM declares {known} of the {len(wanted)} names VMs of this size get; not "
                        f"{_few(missing)} (from [Cloud] node_name_template {template!r}): such a "
                        "VM's slurmd is refused and it never joins",
                        f"declare them in slurm.conf (NodeName={wanted[0]}... CPUs={size.cores} "
                        "State=FUTURE, see deploy/slurm/nodemanager.conf), or correct [Cloud] "
                        "cluster / node_name_template / max_nodes")
        elif wanted:
            yield Check(f"slurm nodes of size {size.name}", True, f"SLURM declares all {len(wanted)} "
                        f"names VMs of this size get ({wanted[0]} to {wanted[-1]})")
        declared = [n for n in wanted if n in nodes]
        if not declared:
            continue
        yield _size_fit(size, declared[0], nodes[declared[0]], mem_scaling)


def _size_fit(size: Size, name: str, node: Mapping[str, str], mem_scaling: float) -> Check:
    check = f"size {size.name} vs SLURM"
    try:
        cpus, memory = int(node.get("CPUTot", "")), int(node.get("RealMemory", ""))
    except ValueError:
        return Check(check, None, f"{name}: CPUTot/RealMemory not numbers in `scontrol show node`", "")
    usable = int(size.ram_mb * mem_scaling)
    problems = []
    if cpus != size.cores:
        problems.append(f"SLURM declares CPUs={cpus}, the size has cores = {size.cores}"
                        + (" (a VM with fewer CPUs than its NodeName line is refused: INVAL)"
                           if cpus > size.cores else " (the node manager plans for cores SLURM never uses)"))
    if memory > size.ram_mb:
        problems.append(f"RealMemory={memory} is over the size's ram_mb = {size.ram_mb} (SLURM "
                        "refuses a VM with less memory than its NodeName line: INVAL)")
    if problems:
        return Check(check, False, f"{name}: " + "; ".join(problems),
                     f"make [Size {size.name}] cores/ram_mb and the NodeName line's CPUs/RealMemory agree")
    if memory < usable:
        return Check(check, None, f"{name}: RealMemory={memory}, under the {usable} MB the node manager "
                     f"counts usable (ram_mb {size.ram_mb} x node_mem_scaling {mem_scaling:g}): a job "
                     "asking for memory between the two boots a VM that cannot run it",
                     f"raise RealMemory to {usable}, or set [Daemon] node_mem_scaling to at most "
                     f"{memory / size.ram_mb:.3f}")
    return Check(check, True, f"{name}: CPUs={cpus}, RealMemory={memory}: the size's {size.cores} "
                              f"cores and {usable}-{size.ram_mb} MB")


def _few(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
