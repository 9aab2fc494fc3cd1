"""``simulate --clouds FILE``: several simulated clouds, each with its own boot time, capacity,
capacity outages and spot market, and the sizes each sells.

The file is INI: a ``[Cloud NAME]`` section per cloud and ``[Size NAME]`` sections as in the
configuration, each with ``cloud = NAME`` (the sizes replace the configuration's)::

    [Cloud east]
    boot_delay = 90s        ; create to running (default: --boot-delay)
    capacity = 20           ; most VMs of this cloud up at once (0: no limit)
    outage = 2d-3d, 9d-9d12h  ; no capacity at all between these times from the window's start
    spot_rate = 0.2         ; reclaims per spot VM-day its market has (its spot sizes' default)

A boot beyond a cloud's capacity, or in an outage, fails with a capacity error, as a real cloud's
``InsufficientInstanceCapacity`` does: the controller's breakers and size choice take it from there.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass, replace

from nodemanager.configuration.config import ConfigError, loads
from nodemanager.configuration.values import parse_duration
from nodemanager.model import Size

__all__ = ["SimCloudSpec", "read_clouds", "MAX_CAPACITY"]

MAX_CAPACITY = 1_000_000
_OWN = ("boot_delay", "capacity", "outage", "spot_rate")


@dataclass(frozen=True)
class SimCloudSpec:
    """One simulated cloud: ``boot_delay`` seconds (None: the run's), ``capacity`` VMs at once (0:
    no limit), ``outages`` as (start, end) seconds from the replay window's start."""

    name: str
    boot_delay: float | None = None
    capacity: int = 0
    outages: tuple[tuple[float, float], ...] = ()
    spot_rate: float | None = None


class CloudsFileError(ValueError):
    """A bad ``--clouds`` file: the message names the file, line and option."""


def _number(path: str, where: str, option: str, text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CloudsFileError(f"{path}: [{where}] {option}: not a number, got {text!r}") from None
    if not low <= value <= high:
        raise CloudsFileError(f"{path}: [{where}] {option}: must be from {low:g} to {high:g}, got {text!r}")
    return value


def _outages(path: str, where: str, text: str) -> tuple[tuple[float, float], ...]:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        start, sep, end = part.partition("-")
        try:
            window = (parse_duration(start.strip()), parse_duration(end.strip()))
        except ValueError as exc:
            raise CloudsFileError(f"{path}: [{where}] outage: {part!r}: {exc}") from None
        if not sep or window[1] <= window[0]:
            raise CloudsFileError(f"{path}: [{where}] outage: {part!r} is not START-END with END after START")
        out.append(window)
    return tuple(out)


def read_clouds(path: str) -> tuple[tuple[SimCloudSpec, ...], tuple[Size, ...]]:
    """The clouds and sizes of a ``--clouds`` file; :class:`CloudsFileError` names what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CloudsFileError(f"{path}: {exc.strerror or exc}") from None
    cp = configparser.ConfigParser(interpolation=None, strict=True, inline_comment_prefixes=(";",))
    try:
        cp.read_string(text, source=path)
    except configparser.Error as exc:
        raise CloudsFileError(f"{path}: {str(exc).splitlines()[0]}") from None
    clouds: list[SimCloudSpec] = []
    for section in cp.sections():
        if not section.startswith("Cloud "):
            if not section.startswith("Size "):
                raise CloudsFileError(f"{path}: [{section}]: unknown section (known: [Cloud NAME], [Size NAME])")
            continue
        opts = dict(cp.items(section))
        unknown = sorted(set(opts) - set(_OWN))
        if unknown:
            raise CloudsFileError(f"{path}: [{section}] {unknown[0]}: unknown option (known: {', '.join(_OWN)})")
        try:
            boot = parse_duration(opts["boot_delay"]) if "boot_delay" in opts else None
        except ValueError as exc:
            raise CloudsFileError(f"{path}: [{section}] boot_delay: {exc}") from None
        clouds.append(SimCloudSpec(
            name=section[len("Cloud "):].strip(), boot_delay=boot,
            capacity=int(_number(path, section, "capacity", opts.get("capacity", "0"), 0, MAX_CAPACITY)),
            outages=_outages(path, section, opts.get("outage", "")),
            spot_rate=(_number(path, section, "spot_rate", opts["spot_rate"], 0, 10_000)
                       if "spot_rate" in opts else None)))
    # the sizes are read as the configuration reads them, at their own lines: every other line
    # becomes a comment, and each size's cloud is taken out and put back after
    lines = text.splitlines()
    own: dict[str, str] = {}
    section = ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[]").strip()
        if not section.startswith("Size "):
            lines[i] = "#"
        elif stripped.split("=", 1)[0].strip().lower() == "cloud" and "=" in stripped:
            own[section[5:].strip()] = stripped.split("=", 1)[1].split(";")[0].strip()
            lines[i] = "#"
    try:
        sizes = loads("\n".join(lines) + "\n", path, require_sizes=True).core.sizes
    except ConfigError as exc:
        raise CloudsFileError("\n".join(str(p) for p in exc.problems)) from None
    by_name = {c.name: c for c in clouds}
    out = []
    for size in sizes:
        cloud = by_name.get(own.get(size.name, ""))
        if cloud is None:
            raise CloudsFileError(f"{path}: [Size {size.name}] cloud: names "
                                  f"{own.get(size.name) or 'no cloud'}; one of {', '.join(by_name) or 'none'}")
        if size.market == "spot" and size.interruptions_per_day == 0 and cloud.spot_rate is not None:
            size = replace(size, interruptions_per_day=cloud.spot_rate)
        out.append(replace(size, cloud=cloud.name))
    return tuple(clouds), tuple(out)
