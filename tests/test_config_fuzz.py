"""Property-based fuzzing of the config parser: any text ends in Settings or a ConfigError."""

from hypothesis import given, settings, strategies as st

from nodemanager.configuration.config import ConfigError, loads
from nodemanager.configuration.settings import Settings

SECTIONS = ["Daemon", "Polling", "Drain", "Cloud", "Cloud Create", "Scheduler", "Manage",
            "Size a", "Size b", "Bogus", ""]
OPTIONS = ["min_nodes", "max_nodes", "idle_grace", "boot_grace", "type", "driver", "cores",
           "ram_mb", "price", "shutdown_windows", "escalate_fast", "port", "token", "schedule",
           "node_name_template", "secure", "matrix", "x"]
VALUES = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(
    ["5m", "1h", "-1", "yes", "no", "ec2", "slurm", "htcondor", "simulated", "54, 5, 1",
     "(time() - LastDrainStartTime) > 3600", "(", "{seq}", "{bogus}", "", "1e999", "nan"]),
    st.text(max_size=12))


@st.composite
def ini_texts(draw):
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        lines.append(f"[{draw(st.sampled_from(SECTIONS))}]")
        for _ in range(draw(st.integers(0, 5))):
            lines.append(f"{draw(st.sampled_from(OPTIONS))} = {draw(VALUES)}")
    return "\n".join(lines) + "\n"


def _check(text: str) -> None:
    try:
        result = loads(text, "fuzz.ini")
    except ConfigError as exc:
        assert exc.problems and all(str(p).startswith("fuzz.ini") for p in exc.problems)
    else:
        assert isinstance(result, Settings)


@settings(max_examples=300, deadline=None)
@given(ini_texts())
def test_structured_ini_never_crashes(text):
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text):
    _check(text)
