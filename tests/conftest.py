"""Shared fixtures. Fixtures that start real components live in tests/fixtures/, one file each."""

import os
import pathlib

import pytest
from hypothesis import settings

# "ci" (scripts/test): the same examples every run, so a new random draw never fails a submission;
# "explore" (the default for a plain pytest run): new examples each run, to find new bugs
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "explore"))

pytest_plugins: list[str] = ["tests.fixtures.observability", "tests.fixtures.daemon", "tests.fixtures.moto", "tests.fixtures.slurm", "tests.fixtures.htcondor", "tests.fixtures.etcd", "tests.fixtures.postgres"]

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def traces_dir() -> pathlib.Path:
    """The development traces, read from ../shared/traces (never copied into the project)."""
    path = pathlib.Path(os.environ.get("NODEMANAGER_TRACES", SHARED / "traces"))
    if not path.is_dir():
        pytest.fail(f"development traces not found at {path} (set NODEMANAGER_TRACES)")
    return path
