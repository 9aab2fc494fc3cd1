"""Every numeric option has a finite, documented range, checked at load with file, line and option
named: values that cannot work (nan, inf, a price of 1e-320, a call rate of 1e-300) never start."""

import re
from pathlib import Path

import pytest

from nodemanager.configuration.config import ConfigError, loads
from nodemanager.configuration import options
from nodemanager.configuration.kinds import scheduler_kinds
from nodemanager.configuration.options import NUMBERS
from nodemanager.configuration.values import Ranged

REPO = Path(__file__).resolve().parent.parent
HOSTILE = ("nan", "inf", "-inf", "1e-320", "1e308", "-5")
SIZE = "[Size small]\ncores = 2\nram_mb = 4096\nprice = 0.1\n"


def _config(section, option, value):
    """A config whose only problem is ``option = value`` in ``section``, and that option's line."""
    if section == "Size NAME":
        kept = {"cores": "cores = 2", "ram_mb": "ram_mb = 4096", "price": "price = 0.1"}
        head = ["[Size small]", *(v for k, v in kept.items() if k != option)]
    elif section.startswith("Scheduler "):
        head = [*SIZE.splitlines(), "[Scheduler]", f"type = {section.split()[1]}"]
    else:
        head = [*SIZE.splitlines(), f"[{section}]"]
        if section == "HA":
            head = ["[Cloud]", "deployment_id = d-1", *head]
    text = "\n".join([*head, f"{option} = {value}"]) + "\n"
    return text, len(head) + 1


@pytest.mark.parametrize("where", sorted(NUMBERS), ids=lambda w: "-".join(w).replace(" ", "_"))
def test_every_numeric_option_refuses_values_that_cannot_work_naming_file_line_and_option(where):
    section, option = where
    shown = "Size small" if section == "Size NAME" else section.split()[0] if section.startswith("Scheduler") else section
    for value in HOSTILE:
        if value == "-5" and NUMBERS[where].low <= -5:
            continue
        text, line = _config(section, option, value)
        with pytest.raises(ConfigError) as err:
            loads(text, "site.ini")
        named = [str(p) for p in err.value.problems if p.option == option]
        assert named, f"{section} {option} = {value} refused without naming it: {err.value}"
        assert named[0].startswith(f"site.ini:{line}: [{shown}] {option}: "), named[0]


def test_the_range_is_in_the_message_and_a_value_inside_it_loads():
    with pytest.raises(ConfigError) as err:
        loads(SIZE.replace("price = 0.1", "price = 1e-320"), "site.ini")
    assert str(err.value) == ("site.ini:4: [Size small] price: must be from 0.000001 to 1000000, or 0, "
                              "got '1e-320'")
    with pytest.raises(ConfigError) as err:
        loads(SIZE + "[Cloud]\ncalls_per_second = 0.000001\n", "site.ini")
    assert "site.ini:6: [Cloud] calls_per_second: must be from 0.1 to 1000, or 0" in str(err.value)
    with pytest.raises(ConfigError) as err:
        loads(SIZE + "[Cloud]\ntimeout = nan\n", "site.ini")
    assert "site.ini:6: [Cloud] timeout: expected a number, got 'nan'" in str(err.value)
    ok = loads(SIZE + "[Cloud]\ncalls_per_second = 0\ntimeout = 30\n[Polling]\ncycle_interval = 0.5\n")
    assert ok.cloud.calls_per_second == 0 and ok.poll.cycle_interval == 0.5


def test_no_numeric_option_is_left_without_a_range():
    """An option that parses "5" as a number must be in NUMBERS (so a new one cannot slip by)."""
    tables = {"Daemon": {k: v[1] for k, v in options.DAEMON.items()}, "Polling": options.POLL,
              "Drain": options.DRAIN, "Manage": options.MANAGE, "Size NAME": options.SIZE, "HA": options.HA}
    for section, table in tables.items():
        for option, parse in table.items():
            try:
                value = parse("5")
            except (ValueError, TypeError):
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert isinstance(parse, Ranged) and (section, option) in NUMBERS, (section, option)
    for kind, registered in scheduler_kinds().items():
        allowed = registered.options
        numeric = {"timeout", "query_timeout", "join_delay", "boot_delay", "jobs_per_hour", "job_runtime",
                   "job_cpus", "seed", "burst_every", "burst_size"} & allowed
        assert numeric == set(registered.numbers), kind


def test_the_ranges_are_documented_as_the_code_has_them():
    doc = (REPO / "docs" / "configuration.md").read_text()
    for (section, option), parse in NUMBERS.items():
        row = f"| `[{section}] {option}` | {parse.text} |"
        assert row in doc, f"docs/configuration.md lacks the row {row}"


def test_budget_nodes_refuse_values_that_cannot_work():
    for value in HOSTILE + ("nan%", "1e308%", "-1%"):
        with pytest.raises(ConfigError, match=re.escape("site.ini:6: [Budget night] nodes:")):
            loads(SIZE + f"[Budget night]\nnodes = {value}\n", "site.ini")
