"""``nodemanager advise``: replay a site's history under today's configuration and under each
setting that moves cost and waits changed, print the Pareto front of money against p95 wait with
today's point marked, and propose the change as a configuration diff.

Exit codes: 0 success; 1 bad input (history, config), with the file:line or option named;
2 bad command-line usage (from argparse).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nodemanager.commands.simulate_values import BadInput, add_input_options, duration, read_input

if TYPE_CHECKING:
    from nodemanager.sim.advisor import Candidate, Point

__all__ = ["register", "GIVE_UP"]

GIVE_UP = 86400.0   # a replay still running jobs a day after a no-wait pool would have ended them stops there


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "advise", help="replay the site's history under settings that move cost and waits, and propose a change",
        description="Replay a job history under today's configuration and under each setting that moves "
                    "cost and waits changed (idle_grace and its mode, consolidation, the cost profile, runtime "
                    "prediction, the sizes offered, the spot re-run share), print the Pareto front of money "
                    "against p95 wait and propose the change as a diff of the configuration. A configuration "
                    "whose replay killed or evicted a job is never proposed. docs/simulator.md, \"Asking the "
                    "advisor\".")
    add_input_options(p)
    p.add_argument("--config", required=True, metavar="INI", help="today's configuration file")
    p.add_argument("--try", dest="tries", action="append", default=[], metavar="SECTION:OPTION=VALUE;...",
                   help="also try this change (options separated by ;), e.g. \"Daemon:idle_grace=30m\"; repeatable")
    p.add_argument("--wait-slack", default="60s", metavar="DURATION",
                   help="propose only points whose p95 wait is at most today's plus this (default 60s)")
    p.add_argument("--boot-delay", default="90", metavar="SECONDS", help="cloud: create to running (default 90)")
    p.add_argument("--join-delay", default="30", metavar="SECONDS", help="pool: running to joined (default 30)")
    p.add_argument("--json", action="store_true", help="print the points and the proposal as JSON")
    p.add_argument("--report", metavar="DIR", help="draw the front into DIR/advice.png (needs matplotlib)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        return _advise(args)
    except BadInput as exc:
        print(f"nodemanager advise: {exc}", file=sys.stderr)
        return 1


def _policy(candidate: Candidate, path: str) -> Any:
    import os
    from dataclasses import replace

    import policy_matrix
    from nodemanager.configuration.config import ConfigError, loads
    from nodemanager.sim.baselines import default_size, ours

    try:
        settings = loads(candidate.text, path, base_dir=os.path.dirname(os.path.abspath(path)))
    except ConfigError as exc:
        raise BadInput(f"{candidate.label}: bad configuration:\n"
                       + "\n".join(f"  {p}" for p in exc.problems)) from None
    if not settings.core.sizes:
        settings = replace(settings, core=replace(settings.core, sizes=(default_size(8),)))
    try:
        matrix = policy_matrix.load(settings.matrix_file) if settings.matrix_file else policy_matrix.load_default()
    except (policy_matrix.MatrixError, OSError) as exc:
        raise BadInput(f"{candidate.label}: bad matrix: {exc}") from None
    return ours(settings, matrix, name=candidate.label)


def _advise(args: argparse.Namespace) -> int:
    import json
    import os

    from nodemanager.sim.advisor import Point, candidates, diff, front, parse_try, propose
    from nodemanager.sim.baselines import SimParams
    from nodemanager.sim.figures import lower_bounds
    from nodemanager.sim.replay_many import run_many

    try:
        with open(args.config, encoding="utf-8") as fh:
            today_text = fh.read()
        tries = [parse_try(t) for t in args.tries]
    except OSError as exc:
        raise BadInput(f"{args.config}: cannot read: {exc}") from None
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    source = read_input(args)
    tried = candidates(today_text, tries)
    policies = [_policy(c, args.config) for c in tried]
    sim = SimParams(boot_delay=duration("--boot-delay", args.boot_delay),
                    join_delay=duration("--join-delay", args.join_delay), give_up_after=GIVE_UP)
    cpn = max(s.cores for s in policies[0].settings.core.sizes)
    bounds = lower_bounds(source.jobs, cpn)
    if not args.json:
        print(f"replaying {len(source.jobs)} jobs of {source.name} under {len(tried)} configurations...",
              file=sys.stderr)
    results = run_many(source.jobs, [(p, False) for p in policies], sim, bounds, trace=source.name,
                       processes=args.jobs or os.cpu_count() or 1, scheduler=args.scheduler)
    points = [Point(candidate=c, money=r.figures.money, wait_p95=r.figures.wait_p95,
                    killed=r.figures.jobs_killed, evicted=r.figures.jobs_evicted,
                    unfinished=r.figures.jobs_unfinished) for c, r in zip(tried, results)]
    best = propose(points, duration("--wait-slack", args.wait_slack))
    on_front = {id(p) for p in front(points)}
    today = points[0]
    if args.json:
        print(json.dumps({
            "history": source.name, "jobs": len(source.jobs), "skipped_jobs": source.skipped,
            "points": [{"label": p.candidate.label, "money": round(p.money, 4), "wait_p95": p.wait_p95,
                        "killed": p.killed, "evicted": p.evicted, "unfinished": p.unfinished,
                        "on_front": id(p) in on_front, "today": p.today} for p in points],
            "proposal": None if best is None else {"label": best.candidate.label, "money": round(best.money, 4),
                                                   "wait_p95": best.wait_p95,
                                                   "diff": diff(today_text, best.candidate, args.config)}},
            indent=2))
    else:
        for line in _table(points, on_front):
            print(line)
        for n in source.notes:
            print(n)
        if best is None:
            print("proposal: keep today's configuration (no point of the front is cheaper within the wait slack)")
        else:
            saved = (today.money - best.money) / today.money * 100 if today.money else 0.0
            print(f"proposal: {best.candidate.label}: money {best.money:.2f} ({saved:.1f} % less than today's "
                  f"{today.money:.2f}), p95 wait {best.wait_p95:.0f} s (today {today.wait_p95:.0f} s)")
            print(diff(today_text, best.candidate, args.config), end="")
    if args.report:
        from nodemanager.sim.advice_plot import draw_front

        path = draw_front(args.report, points, front(points), best, title=f"nodemanager advise: {source.name}")
        print(f"front drawn in {path}", file=sys.stderr)
    return 0


def _table(points: list[Point], on_front: set[int]) -> list[str]:
    from nodemanager.sim.advisor import same_as

    width = max(len(p.candidate.label) for p in points)
    out = [f"{'configuration':<{width}}  {'money':>10}  {'p95 wait s':>10}  {'killed':>6}  {'evicted':>7}  "
           f"{'unfinished':>10}  note"]
    for p in points:
        note = ("never proposed: a job killed, evicted or unfinished" if not p.safe
                else "front" if id(p) in on_front else "as today" if not p.today and same_as(p, points[0]) else "")
        if p.today:
            note = "today" + (", front" if note == "front" else f", {note}" if note else "")
        out.append(f"{p.candidate.label:<{width}}  {p.money:>10.2f}  {p.wait_p95:>10.0f}  {p.killed:>6}  "
                   f"{p.evicted:>7}  {p.unfinished:>10}  {note}")
    return out
