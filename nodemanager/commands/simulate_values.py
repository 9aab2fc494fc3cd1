"""The values of ``nodemanager simulate``'s options, read and checked: each error names the option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodemanager.sim.history import ReplayInput

__all__ = ["BadInput", "add_input_options", "duration", "read_input", "read_sweeps", "size_list"]


class BadInput(Exception):
    """Bad input: the message names the option, file:line or section."""


def duration(option: str, text: str) -> float:
    """``text`` in seconds (``90``, ``5m``, ``2h``); BadInput names ``option``."""
    from nodemanager.configuration.config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"{option} {text!r}: {exc}") from None


def read_sweeps(specs: list[str]) -> list[tuple[str, list[float]]]:
    """Each ``--sweep KEY=V1,V2,...`` as (key, values); BadInput names an unknown key or a bad value."""
    from nodemanager.sim.baselines import SWEEPABLE

    out = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise BadInput(f"--sweep {spec!r}: expected KEY=V1,V2,... (e.g. idle_grace=60,300,900)")
        if key not in SWEEPABLE:
            raise BadInput(f"--sweep {spec!r}: unknown setting {key!r}; one of: {', '.join(SWEEPABLE)}")
        out.append((key, [_sweep_value(key, v.strip()) for v in values.split(",") if v.strip()]))
    return out


def _sweep_value(key: str, text: str) -> float:
    """One swept value, read as the INI option of that name reads it (``15%`` for a share, ``5m``
    for a duration); a key with no numeric option reads as a duration."""
    from nodemanager.configuration.options import DAEMON, POLL, SIZE

    parse = DAEMON[key][1] if key in DAEMON else POLL.get(key) or SIZE.get(key)
    if parse is not None:
        try:
            value = parse(text)
        except ValueError as exc:
            raise BadInput(f"--sweep {key} {text!r}: {exc}") from None
        if isinstance(value, (int, float)):
            return float(value)
    return duration(f"--sweep {key}", text)


def size_list(text: str, cores_per_node: int | None) -> tuple:
    """``--sizes 2,4,8``: one default size per core count, smallest first."""
    from nodemanager.sim.baselines import default_size

    if cores_per_node is not None:
        raise BadInput("--sizes and --cores-per-node exclude each other")
    try:
        cores = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        raise BadInput(f"--sizes {text!r}: expected core counts, e.g. 2,4,8,16") from None
    if not cores or cores[0] <= 0:
        raise BadInput(f"--sizes {text!r}: expected positive core counts, e.g. 2,4,8,16")
    return tuple(default_size(c) for c in cores)


def read_input(args: Any, *, absolute: bool = False) -> ReplayInput:
    """The jobs of ``--trace`` or ``--history``/``--format`` in the ``--skip-days``/``--days``
    window; BadInput names the file (and line) when there are none or it cannot be read."""
    from nodemanager.sim.history import load_input

    path = args.history or args.trace
    try:
        source = load_input(trace=args.trace, history=args.history, fmt=args.format,
                            skip_days=args.skip_days, days=args.days, absolute=absolute)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"{path}: {exc}") from None
    if not source.jobs:
        why = "; ".join(f"{n} skipped: {k} (first at line {source.first_line[k]})" for k, n in source.skipped.items())
        raise BadInput(f"{path}: no usable jobs in the chosen window" + (f" ({why})" if why else ""))
    return source


def add_input_options(p: Any) -> None:
    """The options ``simulate`` and ``advise`` share: what to replay (``--trace`` or ``--history``
    with ``--format``), its window of days, and where the replays run (``--jobs``, ``--scheduler``)."""
    from nodemanager.sim.history import FORMATS

    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", metavar="FILE", help="SWF trace (.swf or .swf.gz)")
    source.add_argument("--history", metavar="FILE", help="the site's own job history (with --format; "
                        "docs/simulator.md, \"Replaying your own history\")")
    p.add_argument("--format", choices=tuple(FORMATS), help="--history's format")
    p.add_argument("--days", type=float, metavar="N", help="replay only N days of submissions")
    p.add_argument("--skip-days", type=float, default=0.0, metavar="N",
                   help="skip the first N days (counted from the first job)")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="replays run in parallel on a local Dask cluster (default: the number of CPUs)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the replays on this running Dask scheduler's workers")
