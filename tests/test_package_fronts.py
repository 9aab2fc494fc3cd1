"""The package fronts: what importing ``nodemanager.core``, ``.cloud``, ``.scheduler`` and the
folders of the package root (``.console``, ``.configuration``, ``.model``) loads, and that every
name a front lists resolves; the folders without a front (``.cycle``, ``.classad``) load nothing.

Each import runs in a fresh interpreter, so modules other tests loaded do not hide a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Anything with I/O, threads or heavy libraries: the pure core must load none of it.
NOT_IN_CORE = ("nodemanager.cloud", "nodemanager.scheduler", "nodemanager.configuration.config",
               "nodemanager.console.metrics", "nodemanager.actors", "policy_matrix.source",
               "libcloud", "htcondor2", "classad2", "pykka", "prometheus_client")


def loaded_after(statement: str) -> list[str]:
    """The module names a fresh interpreter holds after running ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return list(json.loads(out.stdout))


def test_importing_the_core_loads_no_adapter_config_metrics_actors_or_matrix_source() -> None:
    modules = loaded_after("import nodemanager.core")
    leaked = [m for m in modules if m.startswith(NOT_IN_CORE)]
    assert leaked == []
    assert "nodemanager.core.plan" in modules


@pytest.mark.parametrize("front, heavy", [
    ("nodemanager.cloud", ("libcloud", "nodemanager.cloud.libcloud_driver")),
    ("nodemanager.scheduler", ("htcondor2", "classad2", "nodemanager.scheduler.htcondor",
                               "nodemanager.scheduler.slurm")),
])
def test_a_front_loads_its_adapters_only_on_first_use(front: str, heavy: tuple[str, ...]) -> None:
    assert [m for m in loaded_after(f"import {front}") if m.startswith(heavy)] == []


FOLDERS = ["nodemanager.console", "nodemanager.configuration"]


@pytest.mark.parametrize("front", FOLDERS)
def test_a_folder_front_loads_its_modules_only_on_first_use(front: str) -> None:
    # any part of the tree may import one module of a folder without pulling in the rest
    assert [m for m in loaded_after(f"import {front}") if m.startswith(front + ".")] == []


@pytest.mark.parametrize("front", ["nodemanager.core", "nodemanager.cloud", "nodemanager.scheduler",
                                   "nodemanager.model", "policy_matrix", *FOLDERS])
def test_every_name_a_front_lists_resolves(front: str) -> None:
    code = (f"import {front} as m\n"
            "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
            "print(json.dumps(missing))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], check=True,
                         capture_output=True, text=True)
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("folder", ["nodemanager.cycle", "nodemanager.classad"])
def test_a_folder_without_a_front_loads_none_of_its_modules(folder: str) -> None:
    assert [m for m in loaded_after(f"import {folder}") if m.startswith(folder + ".")] == []
