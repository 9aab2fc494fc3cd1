"""A SLURM job's generic resources (GRES): GPUs and the rest, per node, from what ``squeue --json``
shows of ``--gres``, ``--gpus``, ``--gpus-per-node`` and ``--gpus-per-task``. Pure."""

from __future__ import annotations

import re

__all__ = ["parse_gres", "gres_per_node"]


def parse_gres(text: str) -> tuple[int, str, tuple[str, ...]]:
    """(GPUs per node, GPU type or "", other GRES) of a job's ``tres_per_node``: 22.05 writes
    ``gres:gpu:tesla:1``, 23.02+ ``gres/gpu:tesla:1``; a GPU without a count is one."""
    gpus, gpu_type, other = 0, "", []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        body = re.sub(r"^gres[:/]", "", item)
        name, _, rest = body.partition(":")
        if name != "gpu":
            if body != item:  # another GRES (no size offers one); other TRES are not GRES
                other.append(body)
            continue
        parts = [p for p in re.split(r"[:=]", rest) if p]
        count = 1
        if parts and parts[-1].isdigit():
            count = int(parts.pop())
        if parts:
            gpu_type = parts[0]
        gpus += count
    return gpus, gpu_type, tuple(other)


def gres_per_node(per_node: str, per_job: str, per_task: str, nodes: int, tasks: int) -> str:
    """A pending job's GRES per node, in ``tres_per_node`` form: ``--gres``/``--gpus-per-node``
    as given, else ``--gpus`` (``tres_per_job``) spread over its ``nodes`` (rounded up), else
    ``--gpus-per-task`` (``tres_per_task``) times its tasks per node (rounded up)."""
    if per_node or not (per_job or per_task):
        return per_node
    gpus, gpu_type, other = parse_gres(per_job or per_task)
    nodes = max(nodes, 1)
    n = -(-gpus // nodes) if per_job else gpus * -(-max(tasks, 1) // nodes)
    items = [f"gres:{o}" for o in other] + ([f"gres:gpu:{gpu_type + ':' if gpu_type else ''}{n}"] if gpus else [])
    return ",".join(items)
