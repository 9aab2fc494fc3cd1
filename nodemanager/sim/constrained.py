"""GPU and constrained jobs for replays: a seeded fraction of a trace's jobs
made to need a GPU or a machine attribute, and the size that serves them.

``simulate --gpu-fraction F`` turns a fraction F of the trace's jobs into GPU jobs (each piece
asks ``RequestGPUs = 1``) and adds the size :func:`gpu_size` (the base size with GPUs, at 3x its
price). ``--constrained-fraction F`` gives a fraction F of the jobs ``Requirements =``
:data:`REQUIREMENT` and adds :func:`docker_size` (the base size advertising ``HasDocker = true``,
at 1.25x). Which jobs is decided by ``--job-seed`` alone, so every policy of a run replays the
same jobs.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Sequence

from nodemanager.model import Size

__all__ = ["REQUIREMENT", "gpu_size", "docker_size", "constrain", "special_sizes"]

REQUIREMENT = "TARGET.HasDocker =?= true"


def gpu_size(base: Size) -> Size:
    """``base`` with one GPU per two cores (at least one), at three times the price."""
    return replace(base, name=f"{base.name}-gpu", instance_type="", gpus=max(1, base.cores // 2),
                   gpu_type="sim", price=round(base.price * 3, 6))


def docker_size(base: Size) -> Size:
    """``base`` whose startds advertise ``HasDocker = true``, at 1.25 times the price."""
    return replace(base, name=f"{base.name}-docker", instance_type="",
                   attributes=(("HasDocker", "true"),), price=round(base.price * 1.25, 6))


def constrain(pieces: Sequence[Any], gpu_fraction: float, constrained_fraction: float,
              seed: int) -> list[Any]:
    """``pieces`` (replay pieces: ``index`` of the trace job, ``job``) with a seeded fraction of
    the trace jobs needing a GPU per piece, and another fraction :data:`REQUIREMENT`; all pieces
    of one trace job alike. Both fractions 0: ``pieces`` unchanged."""
    if gpu_fraction <= 0 and constrained_fraction <= 0:
        return list(pieces)
    rng = random.Random(seed)
    kinds: dict[int, str] = {}
    out = []
    for p in pieces:
        kind = kinds.get(p.index)
        if kind is None:
            draw = rng.random()
            kind = kinds[p.index] = ("gpu" if draw < gpu_fraction else "constrained"
                                     if draw < gpu_fraction + constrained_fraction else "")
        if kind == "gpu":
            p = replace(p, job=replace(p.job, gpus=1))
        elif kind == "constrained":
            p = replace(p, job=replace(p.job, requirements=REQUIREMENT))
        out.append(p)
    return out


def special_sizes(base: Size, gpu_fraction: float, constrained_fraction: float) -> tuple[Size, ...]:
    """The sizes ``simulate --gpu-fraction`` / ``--constrained-fraction`` jobs need (none without
    them); ValueError naming the option for a fraction out of range."""
    for option, value in (("--gpu-fraction", gpu_fraction), ("--constrained-fraction", constrained_fraction)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{option} {value:g}: expected a fraction from 0 to 1")
    if gpu_fraction + constrained_fraction > 1.0:
        raise ValueError("--gpu-fraction and --constrained-fraction add up to more than 1")
    return ((gpu_size(base),) if gpu_fraction > 0 else ()) + ((docker_size(base),) if constrained_fraction > 0 else ())
