"""benchmarks/not_dominated.py's verdict: a baseline point as cheap and as fast as the cost profile
(ties included) is named, ours are never baselines, and the profile is set against Slurm power
saving's defaults."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("nm_not_dominated", REPO / "benchmarks" / "not_dominated.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _run(policy: str, money: float, p95: float, **sweep: float) -> dict:
    params = {"baseline": policy, **({"sweep": sweep} if sweep else {})}
    name = policy + "".join(f" {k}={v:g}" for k, v in sweep.items())
    return {"policy": name, "params": params, "money": money, "wait_p95": p95, "jobs_killed": 0}


def test_a_baseline_point_as_cheap_and_as_fast_is_named_and_ties_count():
    nd = _script()
    doc = {"runs": [_run("nodemanager-cost", 100.0, 170.0), _run("slurm-power-save", 101.0, 168.0),
                    _run("static", 300.0, 57.0)],
           "sweep": [_run("slurm-power-save", 100.0, 170.0, idle_grace=60),     # a tie: as cheap, as fast
                     _run("arvados", 99.0, 171.0, idle_grace=60),               # cheaper, slower
                     _run("nodemanager-cost", 90.0, 100.0, idle_grace=60)]}     # ours: never a baseline
    row = nd.judge("w", doc)
    assert [r["policy"] for r in row.by] == ["slurm-power-save idle_grace=60"]
    line = nd.line(row)
    assert "-0.99 %" in line and "**yes**: slurm-power-save idle_grace=60 100.00 (170)" in line
    doc["sweep"][0] = _run("slurm-power-save", 100.01, 170.0, idle_grace=60)
    assert nd.line(nd.judge("w", doc)).endswith("| no |")


def test_an_unknown_window_is_refused_with_the_windows_named(capsys):
    nd = _script()
    with pytest.raises(SystemExit):
        nd.main(["--windows", "lpc,nights"])
    err = capsys.readouterr().err
    assert "unknown nights" in err and "long-wide" in err
