"""``nodemanager simulate``: replay an SWF workload through the real core, against baselines.

Exit codes: 0 success; 1 bad input (trace, config, matrix), with the file:line or option named;
2 bad command-line usage (from argparse).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nodemanager.commands.simulate_values import (BadInput, add_input_options, duration, read_input, read_sweeps,
                                                  size_list)

if TYPE_CHECKING:
    from nodemanager.model import Size
    from nodemanager.configuration.settings import Settings
    from policy_matrix import Matrix

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help="replay an SWF job trace and report what a policy costs",
        description="Replay a Parallel Workloads Archive trace (SWF, optionally .gz) through the "
                    "same decision core and actuator as the daemon, on a simulated cloud and "
                    "pool with a virtual clock. Prints paid node-hours against lower bounds, job "
                    "waits and actions; --compare adds the peers' policies (static, Arvados, "
                    "cluster-autoscaler, Slurm power saving, Karpenter, COBalD). How each "
                    "figure is computed: docs/simulator.md.")
    add_input_options(p)
    p.add_argument("--config", metavar="INI", help="configuration file (default: embedded defaults; "
                   "with a config, its [Daemon] max_nodes applies)")
    p.add_argument("--matrix", metavar="FILE", action="append", default=[],
                   help="policy matrix (repeat to compare matrices on the same trace)")
    p.add_argument("--compare", action="store_true", help="also run the baseline policies")
    p.add_argument("--only", metavar="NAME,...",
                   help="run only these policies, by their names in the tables (e.g. "
                        "slurm-power-save,nodemanager-cost with --compare)")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="run each policy once per value (e.g. idle_grace=60,300,900); repeatable, "
                        "each sweep on its own; values read as in the config (5m, 15%%)")
    p.add_argument("--cores-per-node", type=int, metavar="N",
                   help="the one node size's cores (default: the config's size, else 8)")
    p.add_argument("--sizes", metavar="C1,C2,...",
                   help="several node sizes by cores (e.g. 2,4,8,16): 4 GB and the same price per "
                        "core each (default: the config's sizes, else one size)")
    p.add_argument("--clouds", metavar="FILE",
                   help="several simulated clouds: [Cloud NAME] sections (boot_delay, capacity, outage, "
                        "spot_rate) and the [Size NAME] sections each sells (cloud = NAME); the sizes "
                        "replace the config's (docs/simulator.md, Several clouds)")
    p.add_argument("--placement", choices=("breadth", "depth", "steered", "ends", "ends-oracle"), default="breadth",
                   help="how the pool places jobs: breadth = first fit in join order (default), depth = the "
                        "fullest node that fits, steered = the lowest keep rank (with steering = yes), ends / "
                        "ends-oracle = the node whose jobs end closest to the job's predicted / true end")
    p.add_argument("--max-nodes", type=int, metavar="N",
                   help="node cap (default: the config's max_nodes with --config, else the peak of "
                        "the no-wait schedule)")
    p.add_argument("--boot-delay", default="90", metavar="SECONDS",
                   help="cloud: create to running (default 90)")
    p.add_argument("--join-delay", default="30", metavar="SECONDS",
                   help="pool: running to the worker joining (default 30)")
    p.add_argument("--max-retirement", default="30d", metavar="DURATION",
                   help="pool: every startd's MaxJobRetirementTime, how long a graceful drain lets a "
                        "job run from its start before evicting it (default 30d)")
    p.add_argument("--billing", choices=("config", "per-second", "hourly"), default="config",
                   help="billing of the simulated cloud (default: the size's; embedded: per-second, "
                        "60 s minimum)")
    p.add_argument("--spot-price-factor", type=float, metavar="F",
                   help="add a spot copy of each size at F x its price (see docs/simulator.md)")
    p.add_argument("--spot-interruptions-per-day", type=float, default=0.0, metavar="R",
                   help="with --spot-price-factor: reclaims per spot VM-day (default 0)")
    p.add_argument("--spot-configured-rate", type=float, metavar="R0",
                   help="with --spot-price-factor: the reclaims per VM-day the spot sizes are configured "
                        "with, when the market has --spot-interruptions-per-day (default: the same)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--report", metavar="DIR", help="write an HTML report with PNG plots into DIR")
    p.add_argument("--by", choices=("user", "group", "size"), help="also say who spent what: node-hours and "
                   "money per SWF user or group id, or size (a node's paid time shared by its jobs' core-seconds)")
    p.add_argument("--gpu-fraction", type=float, default=0.0, metavar="F",
                   help="make this fraction of the jobs (seeded) need a GPU, and add a GPU size "
                        "(docs/simulator.md)")
    p.add_argument("--constrained-fraction", type=float, default=0.0, metavar="F",
                   help="make this fraction of the jobs (seeded) require HasDocker, and add a "
                        "size that offers it")
    p.add_argument("--job-seed", type=int, default=1, metavar="N",
                   help="seed choosing the GPU / constrained jobs (default 1)")
    p.set_defaults(func=_run)


def _fail(message: str) -> int:
    print(f"nodemanager simulate: {message}", file=sys.stderr)
    return 1


def _settings(args: argparse.Namespace, profile: str | None = None):
    from dataclasses import replace

    from nodemanager.configuration.config import ConfigError, load, loads
    from nodemanager.sim.baselines import default_size

    try:
        settings = (load(args.config, profile=profile) if args.config
                    else loads("", "<embedded defaults>", profile=profile))
    except ConfigError as exc:
        raise BadInput("bad configuration:\n" + "\n".join(f"  {p}" for p in exc.problems)) from None
    sizes = settings.core.sizes
    if args.cores_per_node is not None and args.cores_per_node <= 0:
        raise BadInput("--cores-per-node must be at least 1")
    if args.clouds:
        sizes = _clouds(args)[1]
    elif args.sizes is not None:
        sizes = size_list(args.sizes, args.cores_per_node)
    elif args.cores_per_node or not sizes:
        base = sizes[0] if sizes else None
        cores = args.cores_per_node or (base.cores if base else 8)
        size = default_size(cores)
        if base is not None:
            size = replace(base, cores=cores, ram_mb=base.ram_mb * cores // max(base.cores, 1))
        sizes = (size,)
    sizes += _special_sizes(args, sizes[0])
    if args.billing == "per-second":
        sizes = tuple(replace(s, billing_period=0, min_charge=60, shutdown_windows=()) for s in sizes)
    elif args.billing == "hourly":
        sizes = tuple(replace(s, billing_period=3600, shutdown_windows=()) for s in sizes)
    return replace(settings, core=replace(settings.core, sizes=sizes + _spot_sizes(args, sizes)))


def _clouds(args: argparse.Namespace) -> tuple[tuple[Any, ...], tuple[Size, ...]]:
    """The ``--clouds`` file's clouds and sizes (a bad file is bad input, naming the place)."""
    from nodemanager.sim.clouds_file import CloudsFileError, read_clouds
    try:
        return read_clouds(args.clouds)
    except CloudsFileError as exc:
        raise BadInput(str(exc)) from None


def _spot_sizes(args: argparse.Namespace, sizes: tuple[Size, ...]) -> tuple[Size, ...]:
    """The spot copies ``--spot-price-factor`` asks for, one beside each on-demand size."""
    from nodemanager.sim.spot import spot_sizes

    try:
        return spot_sizes(sizes, args.spot_price_factor, args.spot_interruptions_per_day, args.spot_configured_rate)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _special_sizes(args: argparse.Namespace, base: Size) -> tuple[Size, ...]:
    """The sizes --gpu-fraction / --constrained-fraction jobs need (none without them)."""
    from nodemanager.sim.constrained import special_sizes

    try:
        return special_sizes(base, args.gpu_fraction, args.constrained_fraction)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _matrices(args: argparse.Namespace, settings: Settings) -> list[tuple[str, Matrix]]:
    import os

    import policy_matrix

    paths = list(args.matrix) or ([settings.matrix_file] if settings.matrix_file else [])
    if not paths:
        return [("nodemanager", policy_matrix.load_default())]
    out = []
    for path in paths:
        try:
            m = policy_matrix.load(path)
        except policy_matrix.MatrixError as exc:
            raise BadInput(f"bad matrix:\n{exc}") from None
        except OSError as exc:
            raise BadInput(f"{path}: cannot read the matrix: {exc}") from None
        name = "nodemanager" if len(paths) == 1 else f"nodemanager[{os.path.basename(path)}]"
        out.append((name, m))
    return out


def _cost_policy(args: argparse.Namespace, settings: Settings):
    """``nodemanager-cost``: the default policy under the cost profile, on the same
    sizes and node limits as ``settings``."""
    from dataclasses import replace

    import policy_matrix
    from nodemanager.sim import baselines as B

    cost = _settings(args, profile="cost")
    cost = replace(cost, core=replace(cost.core, max_nodes=settings.core.max_nodes,
                                      min_nodes=settings.core.min_nodes))
    return B.ours(cost, policy_matrix.load(cost.matrix_file), "nodemanager-cost")


def _only(policies: list, names: str | None) -> list:
    """``policies`` restricted to ``--only``'s names, in their own order."""
    if names is None:
        return policies
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = [p.name for p in policies]
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise BadInput(f"--only {names}: unknown policy {', '.join(unknown) or '(none named)'}; "
                   f"this run has {', '.join(known)}")
    return [p for p in policies if p.name in wanted]


def _run(args: argparse.Namespace) -> int:
    try:
        return _simulate(args)
    except BadInput as exc:
        return _fail(str(exc))


def _simulate(args: argparse.Namespace) -> int:
    import json
    import os
    import time
    from dataclasses import asdict, replace

    from nodemanager.sim import baselines as B
    from nodemanager.sim.figures import figures_json, format_legend, format_table, lower_bounds, verdicts
    from nodemanager.sim.prediction_figures import accuracy_lines
    from nodemanager.sim.progress import progress_bar
    from nodemanager.sim.spend import spend_lines
    from nodemanager.sim.replay_many import run_many

    t_start = time.perf_counter()
    settings = _settings(args)
    matrices = _matrices(args, settings)
    sweeps = read_sweeps(args.sweep)
    sim = B.SimParams(boot_delay=duration("--boot-delay", args.boot_delay),
                      join_delay=duration("--join-delay", args.join_delay),
                      gpu_fraction=args.gpu_fraction, constrained_fraction=args.constrained_fraction,
                      job_seed=args.job_seed,
                      placement=args.placement,
                      max_retirement=duration("--max-retirement", args.max_retirement), spend_by=args.by or "",
                      spot_rate=args.spot_interruptions_per_day if args.spot_configured_rate is not None else None,
                      clouds=_clouds(args)[0] if args.clouds else ())
    source = read_input(args, absolute=any(s.warm_schedule is not None for s in settings.core.sizes))
    jobs = source.jobs
    sizes = settings.core.sizes
    cpn = max(s.cores for s in sizes)
    bounds = lower_bounds(jobs, cpn)
    max_nodes_from = ""
    if args.max_nodes is not None:
        max_nodes = args.max_nodes
    elif args.config:
        max_nodes = settings.core.max_nodes
    else:
        max_nodes_from = (f" (the peak of this window's no-wait schedule, {bounds.work_node_hours:.1f} "
                          "node-hours of work; --max-nodes N to allow more)")
        # each kind of GPU / constrained job may peak as high as all jobs together
        max_nodes = max(1, bounds.nowait_peak_nodes) * (
            1 + (args.gpu_fraction > 0) + (args.constrained_fraction > 0))
    settings = replace(settings, core=replace(settings.core, max_nodes=max_nodes,
                                              min_nodes=min(settings.core.min_nodes, max_nodes)))
    if len(sizes) > 1 and args.max_nodes is None and not args.config:
        settings = B.several_sizes_caps(settings, max_nodes)
    static_nodes = max(1, min(bounds.nowait_peak_nodes, max_nodes))

    mains = [B.ours(settings, m, name) for name, m in matrices]
    if args.compare:
        mains.append(_cost_policy(args, settings))
        mains += B.baselines(settings, static_nodes)
    mains = _only(mains, args.only)
    variants = []
    for policy in mains:
        for key, values in sweeps:
            for v in values:
                p = B.apply_param(policy, key, v)
                if p is not None:
                    variants.append(p)
    static = next((p for p in mains if p.baseline == "static"), None)  # None: left out by --only
    if sweeps and static is not None and not any(k == "nodes" for k, _ in sweeps):
        for n in sorted({max(1, round(static_nodes * f)) for f in (0.25, 0.5, 0.75)}):
            fewer = B.apply_param(static, "nodes", n) if n < static_nodes else None
            if fewer is not None:
                variants.append(fewer)

    window = (f"days {args.skip_days:g}-{args.skip_days + args.days:g}" if args.days
              else f"days {args.skip_days:g}-end")
    trace = source.name
    runs = [(p, True) for p in mains] + [(p, False) for p in variants]
    processes = args.jobs or os.cpu_count() or 1
    if not args.json:
        print(f"replaying {len(jobs)} jobs of {trace} ({window}) under {len(runs)} "
              f"configuration(s), {min(processes, len(runs))} at a time...", file=sys.stderr)
    with progress_bar(0, "replaying", enabled=not args.json, unit=" replays") as bar:
        results = run_many(jobs, runs, sim, bounds, trace=trace, window=window,
                           processes=processes, progress=bar, scheduler=args.scheduler)
    rows = [r.figures for r in results[:len(mains)]]
    sweep_rows = [r.figures for r in results[len(mains):]]
    if args.compare and len({s.cores for s in sizes}) == 1:  # node-hours of one size compare
        from nodemanager.sim.gap import clairvoyant_node_hours, with_gap

        cv = clairvoyant_node_hours(jobs, cpn, sim.boot_delay + sim.join_delay)
        rows, sweep_rows = with_gap(rows, sweep_rows, cv)
    groups: dict[str, list] = {}
    for f in rows + sweep_rows:
        groups.setdefault(f.params.get("baseline", f.policy), []).append(f)
    ours_rows = [f for f in rows if f.params.get("baseline", "").startswith("nodemanager")]
    judged = []
    if args.compare:
        for f in ours_rows:
            judged += verdicts(f, {k: v for k, v in groups.items() if not k.startswith("nodemanager")})
    # a spot reclaim kills jobs too: only the kills of our drains warn
    killed = [f for f in ours_rows if f.jobs_killed - f.jobs_killed_by.get("by_reclaim", 0) > 0
              and not f.escalations]
    notes = list(source.notes)
    notes.append(f"cloud: boot {sim.boot_delay:g}s, join {sim.join_delay:g}s; "
                 + "; ".join(f"size {s.name}: {s.cores} cores, {s.ram_mb} MB, {s.price:g}/h, "
                             + (f"billed per {s.billing_period}s" if s.billing_period
                                else f"per second, {s.min_charge}s minimum") for s in sizes)
                 + f"; max_nodes {settings.core.max_nodes}{max_nodes_from}"
                 + (f", max_total_price {settings.core.max_total_price:g}/h"
                    if settings.core.max_total_price else "")
                 + f"; placement {sim.placement}-first")
    from nodemanager.text import duration as _words
    for c in sim.clouds:
        notes.append(f"cloud {c.name}: boot {sim.boot_delay if c.boot_delay is None else c.boot_delay:g}s, "
                     f"capacity {c.capacity or 'unlimited'}"
                     + (f", spot reclaims {c.spot_rate:g}/VM-day" if c.spot_rate is not None else "")
                     + "".join(f", outage {_words(a)}-{_words(b)} from the start"
                               for a, b in c.outages)
                     + "; sizes " + ", ".join(s.name for s in sizes if s.cloud == c.name))
    notes += accuracy_lines(rows + sweep_rows)
    notes += source.credit
    wall = time.perf_counter() - t_start

    if args.json:
        out = {"trace": trace, "window": window, "jobs": len(jobs), "cores_per_node": cpn,
               "bounds": asdict(bounds), "max_nodes": max_nodes, "sim": asdict(sim),
               "runs": json.loads(figures_json(rows)), "sweep": json.loads(figures_json(sweep_rows)),
               "verdicts": [{"ours": v.ours, "baseline": v.baseline, "on_front": v.on_front,
                             "dominated_by": [d.params.get("sweep", {}) for d in v.by]}
                            for v in judged],
               "skipped_jobs": source.skipped,
               "skipped_lines": [{"line": n, "reason": why} for n, why in source.named], "wall_seconds": round(wall, 2)}
        print(json.dumps(out, indent=2))
    else:
        print(format_table(rows))
        if sweep_rows:
            print("\nsweep:")
            print(format_table(sweep_rows).split("\n", 2)[-1])
        for f in (rows + sweep_rows) if args.by else ():
            print("\n".join(spend_lines(f.policy, args.by, f.spend)))
        for n in notes:
            print(n)
        print(format_legend())
        for verdict in judged:
            print(verdict.line())
        for f in killed:
            print(f"WARNING: {f.policy} killed {f.jobs_killed - f.jobs_killed_by.get('by_reclaim', 0)} job(s) "
                  "without an escalation")
        print(f"total wall time {wall:.1f}s")
    if args.report:
        from nodemanager.sim.report import write_report

        sweep_groups: dict[str, list] = {}
        for f in sweep_rows:
            sweep_groups.setdefault(f.params.get("baseline", f.policy), []).append(f)
        path = write_report(args.report, rows, {r.figures.policy: r.series for r in results[:len(mains)]
                                                if r.series is not None},
                            sweep_groups, title=f"nodemanager simulate: {trace} ({window})",
                            notes=notes + [v.line() for v in judged])
        print(f"report written to {path}", file=sys.stderr)
    return 0
