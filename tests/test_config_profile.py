"""``[Daemon] profile``: a shipped INI fragment applied under the site's own options."""

import os

import pytest

import policy_matrix
from nodemanager.configuration.config import ConfigError, load, loads

COST_MATRIX = os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix")


def test_cost_profile_turns_consolidation_and_its_matrix_on():
    s = loads("[Daemon]\nprofile = cost\n")
    assert s.core.consolidate is True and s.core.consolidate_margin == 48
    assert s.matrix_file == COST_MATRIX
    matrix = policy_matrix.load(s.matrix_file)
    assert str(matrix.lookup(policy_matrix.StateTuple("underused", "open", "boot wait",
                                                      "not idle")).action) == "START_DRAIN"


def test_the_sites_own_options_win_over_the_profile(tmp_path):
    own = tmp_path / "site.matrix"
    own.write_text(open(policy_matrix.default_path()).read())
    ini = tmp_path / "nodemanager.ini"
    ini.write_text("[Daemon]\nprofile = cost\nconsolidate_margin = 4\nmatrix = site.matrix\n")
    s = load(str(ini))
    assert s.core.consolidate is True and s.core.consolidate_margin == 4
    assert s.matrix_file == str(own)


def test_no_profile_changes_nothing():
    s = loads("[Daemon]\n")
    assert s.core.consolidate is False and s.matrix_file == ""
    assert loads("[Daemon]\nprofile =\n").core.consolidate is False


def test_an_unknown_profile_is_named_at_its_line():
    with pytest.raises(ConfigError) as info:
        loads("[Daemon]\nmax_nodes = 3\nprofile = cheap\n", "site.ini")
    assert str(info.value) == "site.ini:3: [Daemon] profile: expected one of cost, got 'cheap'"


def test_profile_argument_applies_a_profile_to_a_file_without_one():
    s = loads("[Daemon]\nconsolidate_margin = 2\n", profile="cost")
    assert s.core.consolidate is True and s.core.consolidate_margin == 2


def test_cost_profile_times_idle_nodes_by_break_even_and_a_site_may_fix_it():
    assert loads("[Daemon]\n").core.idle_grace_mode == "fixed"
    assert loads("[Daemon]\nprofile = cost\n").core.idle_grace_mode == "break-even"
    assert loads("[Daemon]\nprofile = cost\nidle_grace_mode = fixed\n").core.idle_grace_mode == "fixed"
    with pytest.raises(ConfigError) as info:
        loads("[Daemon]\nidle_grace_mode = adaptive\n", "site.ini")
    assert "site.ini:2" in str(info.value) and "idle_grace_mode" in str(info.value)
    assert "fixed, break-even" in str(info.value)
