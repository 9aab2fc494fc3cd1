"""`nodemanager plan` with sizes that offer GPUs and partitions, and demand that needs them (issue
14 item 6): the GPU job boots the GPU size, demand no size can run (GPUs, a partition, ClassAd
requirements) boots nothing and says why, and requirements that do not parse are an error naming
the demand item."""

import json

from nodemanager import snapshot as sj
from nodemanager.cli import main
from nodemanager.model import Demand, Size
from nodemanager.scheduler.demand_match import match_demand

CONFIG = """[Size cheap8]
cores = 8
ram_mb = 32000
price = 0.40
partitions = batch

[Size gpu8]
cores = 8
ram_mb = 32000
price = 1.20
gpus = 1
gpu_type = t4
partitions = batch, gpu
attributes = HasDocker = true; CUDACapability = 7.5
image = ami-gpu
"""


def _plan(tmp_path, capsys, *demand):
    (tmp_path / "nm.ini").write_text(CONFIG)
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": 1767225600, "polled_at": {"cloud": 1767225590, "scheduler": 1767225590},
        "demand": list(demand)}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config",
                 str(tmp_path / "nm.ini"), "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else err)


def test_a_gpu_job_boots_the_dearer_gpu_size(tmp_path, capsys):
    code, out = _plan(tmp_path, capsys, {"cpus": 1, "ram_mb": 1000, "count": 1, "gpus": 1})
    assert code == 0
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("gpu8", 1)]
    code, out = _plan(tmp_path, capsys, {"cpus": 1, "ram_mb": 1000, "count": 1})
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("cheap8", 1)]


def test_demand_no_size_can_run_boots_nothing_and_says_why(tmp_path, capsys):
    code, out = _plan(tmp_path, capsys, {"cpus": 1, "ram_mb": 1000, "count": 3, "gpus": 2},
                      {"cpus": 1, "ram_mb": 1000, "count": 2, "partition": "bigmem"})
    assert code == 0 and out["boots"] == []
    # what they need, then the signature that tells apart jobs asking alike
    why = {u["what"].rsplit(", signature ", 1)[0]: (u["reason"], u["jobs"], u["text"]) for u in out["unmet"]}
    assert why["1 cpus, 1000 MB, 2 gpus"][:2] == ("unmatched", 3)
    assert "no size has 2 GPUs per node" in why["1 cpus, 1000 MB, 2 gpus"][2]
    assert "no size serves partition bigmem" in why["1 cpus, 1000 MB, partition bigmem"][2]


def test_a_partition_picks_the_sizes_in_it(tmp_path, capsys):
    code, out = _plan(tmp_path, capsys, {"cpus": 2, "ram_mb": 1000, "count": 1, "partition": "gpu"})
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("gpu8", 1)]


def test_requirements_no_size_offers_boot_nothing_and_say_why(tmp_path, capsys):
    """The issue's check: ``OpSys == "WINDOWS"`` holds on no size's offline machine ad."""
    code, out = _plan(tmp_path, capsys, {"cpus": 1, "ram_mb": 1000, "count": 1,
                                         "requirements": 'OpSys == "WINDOWS"'})
    assert code == 0 and out["boots"] == []
    [unmet] = out["unmet"]
    assert unmet["reason"] == "unmatched" and 'OpSys == "WINDOWS"' in unmet["text"]
    code, out = _plan(tmp_path, capsys, {"cpus": 1, "ram_mb": 1000, "count": 1,
                                         "requirements": "HasDocker && CUDACapability >= 7"})
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("gpu8", 1)]


def test_requirements_that_do_not_parse_are_an_error_naming_the_demand_item(tmp_path, capsys):
    code, err = _plan(tmp_path, capsys, {"cpus": 1, "count": 1},
                      {"cpus": 1, "count": 1, "requirements": 'OpSys == == "WINDOWS"'})
    assert code == 1
    assert "snap.json: demand[1]." in err and "Traceback" not in err


def test_snapshot_demand_fields_round_trip():
    d = Demand(cpus=2, ram_mb=100, count=3, gpus=1, partition="gpu", features="avx512",
               requirements="HasDocker", sizes=frozenset({"gpu8"}))
    s = sj.loads(json.dumps({"now": 1767225600, "polled_at": {}, "demand": [
        {"cpus": 2, "ram_mb": 100, "count": 3, "gpus": 1, "partition": "gpu",
         "features": "avx512", "requirements": "HasDocker", "sizes": ["gpu8"]}]}))
    assert s.demand == (d,)
    assert sj.from_json(sj.to_json(s)).demand == (d,)


def test_match_demand_leaves_plain_demand_and_adapter_matches_alone():
    sizes = (Size("a", 8, 1000), Size("g", 8, 1000, gpus=2))
    plain = Demand(cpus=1)
    assert match_demand(plain, sizes, "slurm") is plain
    matched = Demand(cpus=1, requirements="HasDocker", sizes=frozenset({"a"}))
    assert match_demand(matched, sizes, "htcondor") is matched
    assert match_demand(Demand(gpus=1), sizes, "slurm").sizes == frozenset({"g"})
