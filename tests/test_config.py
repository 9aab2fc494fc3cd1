"""The INI configuration: what an admin gets for good and bad files."""

import os
import pathlib
import stat

import pytest

from nodemanager.configuration.config import ConfigError, credential_warnings, load, loads, parse_duration

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_example_config_is_the_embedded_default():
    settings = load(str(REPO / "config.example.ini"))
    assert settings.cloud.driver == "simulated"
    assert settings.scheduler.kind == "simulated"
    assert settings.manage.address == "127.0.0.1"
    assert settings.manage.token == ""
    assert [s.name for s in settings.core.sizes] == ["small"]
    assert settings.core.idle_grace == 60.0
    assert settings.core.boot_grace == 300.0
    assert settings.matrix_file == ""


@pytest.mark.parametrize("text,seconds", [("300", 300), ("300s", 300), ("5m", 300),
                                          ("1.5h", 5400), ("1d", 86400), (" 2M ", 120)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loads(text, "site.ini")
    return [str(p) for p in info.value.problems]


def test_every_problem_is_reported_with_file_line_section_and_option():
    problems = _problems(
        "[Daemon]\n"
        "idle_grace = soon\n"
        "max_nodes = -1\n"
        "idle_gace = 5\n"
        "[Sizes big]\n"
    )
    assert "site.ini:2: [Daemon] idle_grace: expected a duration like 300, 5m or 1h, got 'soon'" in problems
    assert "site.ini:3: [Daemon] max_nodes: must be from 0 to 100000, got '-1'" in problems
    assert "site.ini:4: [Daemon] idle_gace: unknown option; did you mean 'idle_grace'?" in problems
    assert any(p.startswith("site.ini:5: [Sizes big]: unknown section") for p in problems)


def test_size_needs_cores_and_memory():
    problems = _problems("[Size tiny]\nprice = 0.1\n")
    assert "site.ini:1: [Size tiny]: missing required option cores" in problems
    assert "site.ini:1: [Size tiny]: missing required option ram_mb" in problems


def test_real_cloud_needs_a_size():
    problems = _problems("[Cloud]\ndriver = ec2\ncluster = site\nregion = us-east-1\n[Cloud Create]\nimage = ami-1\n")
    assert problems == ["site.ini:2: [Cloud] driver: a real cloud needs at least one [Size NAME] section"]


def test_cloud_constructor_arguments_pass_through():
    settings = loads("[Cloud]\ndriver = EC2\ncluster = site\nkey = AK\nsecret = s3cr3t\nport = 5000\nsecure = no\n"
                     "[Cloud Create]\nimage = ami-1\n[Size m5.large]\ncores = 2\nram_mb = 8000\nprice = 0.1\n")
    assert settings.cloud.driver == "ec2"
    assert dict(settings.cloud.driver_args) == {"key": "AK", "secret": "s3cr3t", "port": "5000",
                                                "secure": "no"}


def test_scheduler_options_are_checked_per_type():
    problems = _problems("[Scheduler]\ntype = slurm\ncollector = cm\n")
    assert problems == ["site.ini:3: [Scheduler] collector: unknown option for type slurm"
                        " (known: bin_dir, cloud_id_field, mark_destroyed, partition, slurm_conf, timeout)"]
    problems = _problems("[Scheduler]\ntype = pbs\n")
    assert problems[0].startswith("site.ini:2: [Scheduler] type: expected one of slurm, htcondor, simulated, got 'pbs'")


def test_bad_escalation_expression_shows_its_text():
    problems = _problems("[Drain]\nescalate_fast = (time() - LastDrainStartTime >\n")
    assert problems[0].startswith("site.ini:2: [Drain] escalate_fast: not a valid ClassAd expression: "
                                  "'(time() - LastDrainStartTime >'")
    problems = _problems("[Drain]\nescalate_quick = \"later\"\n")
    assert problems == ["site.ini:2: [Drain] escalate_quick: ClassAd expression '\"later\"' is a "
                        "constant str, not a condition (true/false)"]


def test_secret_values_never_appear_in_errors():
    problems = _problems("[Manage]\nport = hunter2\ntoken = x\n[Daemon]\nmin_nodes = 3\nmax_nodes = 2\n")
    assert not any("hunter2" in p and "token" in p for p in problems)
    assert "site.ini:6: [Daemon] max_nodes: is below min_nodes (3)" in problems


def test_syntax_error_names_the_line():
    with pytest.raises(ConfigError) as info:
        loads("[Daemon]\nthis is not an option line\n", "site.ini")
    assert str(info.value).startswith("site.ini:2:")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(str(tmp_path / "nope.ini"))
    assert "file not found" in str(info.value)


def test_credentials_readable_by_others_are_warned(tmp_path):
    path = tmp_path / "nm.ini"
    path.write_text("[Cloud]\ndriver = ec2\ncluster = site\nkey = AK\nsecret = s3cr3t\n[Cloud Create]\nimage = ami-1\n[Size a]\ncores = 1\nram_mb = 1\nprice = 0.1\n")
    os.chmod(path, 0o644)
    warnings = credential_warnings(str(path), load(str(path)))
    assert len(warnings) == 1 and "chmod 600" in warnings[0] and "s3cr3t" not in warnings[0]
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    assert credential_warnings(str(path), load(str(path))) == []


def test_relative_matrix_path_resolves_against_the_config_file(tmp_path):
    (tmp_path / "site.ini").write_text("[Daemon]\nmatrix = policy.matrix\n")
    (tmp_path / "policy.matrix").write_text("* | * | * | * -> None\n")
    assert load(str(tmp_path / "site.ini")).matrix_file == str(tmp_path / "policy.matrix")


def test_node_names_need_a_sequence_number():
    assert _problems("[Cloud]\nnode_name_template = {cluster}-{size}\n") == [
        "site.ini:2: [Cloud] node_name_template: must contain {seq}, or every VM of a size would "
        "get the same name"]


def test_every_option_is_documented():
    """docs/configuration.md names every option the loader accepts, so operators never meet an
    undocumented one (and a new option cannot be added without its line there)."""
    from nodemanager.configuration import options as opts
    from nodemanager.configuration.kinds import scheduler_kinds
    doc = (REPO / "docs" / "configuration.md").read_text()
    options = (list(opts.DAEMON) + list(opts.DAEMON_SHELL) + list(opts.POLL)
               + list(opts.DRAIN) + list(opts.MANAGE) + list(opts.SIZE)
               + sorted(opts.CLOUD_OWN) + sorted(set().union(*(k.options for k in scheduler_kinds().values()))))
    missing = [o for o in options if f"`{o}`" not in doc]
    assert missing == []
    example = (REPO / "config.example.ini").read_text()
    shown = [o for o in list(opts.DAEMON) + list(opts.DAEMON_SHELL) + list(opts.POLL)
             + list(opts.DRAIN) + list(opts.MANAGE) if f"\n{o} =" not in example]
    assert shown == []
    # [HA] is optional, so the example shows it commented out: every option, in both places
    assert [o for o in opts.HA if f"`{o}`" not in doc or f"\n# {o} =" not in example] == []


def test_reclaim_foreign_after_is_a_drain_option_the_plan_reads():
    core = loads("[Drain]\nreclaim_foreign_after = 7d\n", "site.ini").core
    assert core.reclaim_foreign_after == 7 * 86400
    assert loads("", "site.ini").core.reclaim_foreign_after == 0       # never, by default
    assert ("site.ini:2: [Drain] reclaim_foreign_after: expected a duration like 300, 5m or 1h, "
            "got 'later'") in _problems("[Drain]\nreclaim_foreign_after = later\n")


def test_ha_section_leaves_its_keys_to_the_deployment_and_reports_bad_values_with_lines():
    s = loads("[Cloud]\ncluster = hpc\ndeployment_id = hpc-1\n[HA]\nendpoints = http://a:2379, https://b:2379\n")
    assert s.ha is not None and s.ha.endpoints == ("http://a:2379", "https://b:2379")
    assert (s.ha.deployment, s.ha.election_key, s.ha.admin_key) == ("", "", "")  # set at start
    assert (s.ha.lease_ttl, s.ha.stop_margin) == (15.0, 5.0)
    assert loads("[Daemon]\n").ha is None
    assert _problems("[HA]\nendpoints = a:2379\nlease_ttl = 10s\nstop_margin = 10s\ncert_file = c.pem\n") == [
        "site.ini:2: [HA] endpoints: 'a:2379' is not an http:// or https:// URL",
        "site.ini:4: [HA] stop_margin: must be above 0 and below lease_ttl (10s)",
        "site.ini:5: [HA] cert_file: cert_file and key_file go together",
        "site.ini: [Cloud] deployment_id: required with [HA]: every head node of this deployment "
        "must carry the same id (for instance the output of `uuidgen`)"]


def test_the_state_dir_defaults_to_the_systemd_units_state_directory(monkeypatch, tmp_path):
    """The shipped unit runs as user nodemanager, not root: its lock goes where systemd says."""
    from nodemanager.configuration.config import loads
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    assert loads("[Manage]\nport = -1\n").manage.state_dir == str(tmp_path / "state")
    assert loads("[Manage]\nstate_dir = /elsewhere\n").manage.state_dir == "/elsewhere"
