"""`nodemanager matrix ...` as an operator uses it: exit codes, output, errors with file:line:col."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import policy_matrix
from nodemanager.cli import main
from policy_matrix.vocabulary import DEFAULT_VOCABULARY

CORPUS = pathlib.Path(__file__).parent / "matrix_corpus"
SITE = """\
# our site drains idle nodes in any window
busy     | * | *             | *             -> None
idle     | * | *             | idle exceeded -> START_DRAIN
idle     | * | *             | *             -> None
down     | * | *             | *             -> START_SHUTDOWN
unpaired | * | boot exceeded | *             -> START_SHUTDOWN
unpaired | * | boot wait     | *             -> None
"""


@pytest.fixture
def site(tmp_path) -> pathlib.Path:
    path = tmp_path / "site.matrix"
    path.write_text(SITE)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["matrix", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_default_and_a_site_file(capsys, site):
    code, out, err = run(capsys, "check")
    assert code == 0 and err == ""
    assert f"{policy_matrix.default_path()}: ok: {len(policy_matrix.load_default().rules)} rules decide all {DEFAULT_VOCABULARY.size} tuples, 0 warnings" in out
    code, out, _ = run(capsys, "check", str(site))
    assert code == 0
    assert policy_matrix.load(site).sha256 in out


def test_check_reports_every_error_and_fails(capsys):
    path = CORPUS / "several_errors.matrix"
    code, out, err = run(capsys, "check", str(path))
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 5
    assert f"{path}:5:32: error: unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?" in err


def test_check_of_a_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "check", str(tmp_path / "nope.matrix"))
    assert code == 1
    assert err.startswith(f"{tmp_path / 'nope.matrix'}: error: cannot read")


def test_show_table_is_a_grid(capsys, site):
    code, out, _ = run(capsys, "show", str(site))
    assert code == 0
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines()
            if line.split()[:1] in (["unpaired"], ["busy"], ["idle"], ["down"])}
    assert rows[("idle", "closed")] == ["-", "-", "START_DRAIN", "-", "-", "START_DRAIN"]
    assert rows[("unpaired", "open")] == ["-", "-", "-"] + ["START_SHUTDOWN"] * 3
    assert "boot wait" in out and "idle exceeded" in out


def test_show_json_of_a_site_file_has_lines(capsys, site):
    code, out, _ = run(capsys, "show", str(site), "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == DEFAULT_VOCABULARY.size
    drain = [r for r in rows if r["action"] == "START_DRAIN" and r["worker_state"] != "reclaimed"]
    assert {r["line"] for r in drain} == {3}
    assert {r["window"] for r in drain} == {"open", "closed"}
    assert all(r["action"] is None for r in rows if r["worker_state"] == "busy")


def test_show_of_a_broken_file_fails_with_its_error(capsys):
    code, out, err = run(capsys, "show", str(CORPUS / "uncovered.matrix"))
    assert code == 1 and out == ""
    assert "uncovered.matrix:7:1: error: 6 of 48 tuples have no rule" in err
    assert "  down | closed | boot exceeded | idle exceeded" in err


def test_explain_prints_action_and_rule_line(capsys, site):
    code, out, _ = run(capsys, "explain", "--matrix", str(site), "idle", "closed", "boot wait", "idle exceeded")
    assert code == 0
    assert out.splitlines()[0] == "(idle, closed, boot wait, idle exceeded) -> START_DRAIN"
    assert f"decided by {site}:3: idle | * | * | idle exceeded -> START_DRAIN" in out
    code, out, _ = run(capsys, "explain", "busy", "open", "boot wait", "not idle")
    assert out.startswith("(busy, open, boot wait, not idle) -> None\n")
    assert "Busy nodes run jobs" in out


def test_explain_json(capsys):
    code, out, _ = run(capsys, "explain", "--format", "json", "idle", "open", "boot wait", "idle exceeded")
    got = json.loads(out)
    assert got["action"] == "START_DRAIN"
    assert got["file"] == policy_matrix.default_path()
    assert open(got["file"]).read().splitlines()[got["line"] - 1].strip() == got["rule"]


def test_explain_suggests_the_nearest_value(capsys):
    code, out, err = run(capsys, "explain", "idle", "opne", "boot wait", "idle exceed")
    assert code == 2 and out == ""
    assert "unknown window 'opne'; did you mean 'open'?" in err
    assert "unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?" in err


def test_explain_takes_two_word_values_unquoted_or_with_underscores(capsys):
    quoted = run(capsys, "explain", "idle", "open", "boot exceeded", "idle exceeded")
    assert quoted[0] == 0 and quoted[1].startswith("(idle, open, boot exceeded, idle exceeded) -> START_DRAIN")
    assert run(capsys, "explain", *"idle open boot exceeded idle exceeded".split()) == quoted
    assert run(capsys, "explain", "idle", "open", "boot_exceeded", "idle_exceeded") == quoted
    code, out, err = run(capsys, "explain", *"idel open boot exceeded idle exceeded".split())
    assert code == 2 and "unknown worker_state 'idel'; did you mean 'idle'?" in err
    code, out, err = run(capsys, "explain", "idle", "open", "boot")
    assert code == 2 and "expected worker_state window boot_grace idle_grace, got 3 value(s)" in err


def test_check_lists_uncovered_tuples_one_per_line(capsys, tmp_path):
    partial = tmp_path / "partial.matrix"
    partial.write_text("busy | * | * | * -> None\n")
    code, _, err = run(capsys, "check", str(partial))
    assert code == 1
    assert "\\x0a" not in err
    lines = err.splitlines()
    assert lines[0].startswith(f"{partial}:1:1: error: 36 of 48 tuples have no rule")
    assert "  idle | open | boot wait | not idle" in lines


def test_diff_lists_changes_old_to_new(capsys, site):
    code, out, _ = run(capsys, "diff", policy_matrix.default_path(), str(site))
    assert code == 0
    lines = out.splitlines()
    assert lines[-1] == f"2 of {DEFAULT_VOCABULARY.size} tuples change"
    assert lines[0].startswith("idle | closed | boot wait | idle exceeded: None (")
    assert lines[0].endswith(f"-> START_DRAIN ({site}:3)")
    code, out, _ = run(capsys, "diff", str(site), str(site))
    assert code == 0 and out.startswith("no tuple changes its action")


def test_diff_json(capsys, site):
    code, out, _ = run(capsys, "diff", "--format", "json", str(site), policy_matrix.default_path())
    assert json.loads(out) == [
        {"worker_state": "idle", "window": "closed", "boot_grace": g, "idle_grace": "idle exceeded",
         "old": "START_DRAIN", "new": None} for g in ("boot wait", "boot exceeded")]


def test_import_dict_prints_a_matrix_file(capsys, tmp_path):
    source = tmp_path / "transitions.py"
    table = {t.as_tuple(): m.action.to_json() for t, m in policy_matrix.load_default().entries()}
    source.write_text("transitions = " + repr(table) + "\n")
    code, out, _ = run(capsys, "import-dict", str(source))
    assert code == 0
    assert policy_matrix.diff(policy_matrix.load_default(), policy_matrix.parse(out, "out")) == []
    code, out, _ = run(capsys, "import-dict", "--compact", str(source))
    assert policy_matrix.diff(policy_matrix.load_default(), policy_matrix.parse(out, "out")) == []


def test_import_dict_error_names_file_line_col(capsys, tmp_path):
    source = tmp_path / "bad.py"
    source.write_text("{\n ('idle', 'open', 'boot wait', 'idle exceed'): 'START_DRAIN',\n}\n")
    code, out, err = run(capsys, "import-dict", str(source))
    assert code == 1 and out == ""
    assert f"{source}:2:32: error: unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?" in err


def test_missing_verb_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["matrix"])
    assert info.value.code == 2


def test_console_script_runs_check_and_explain():
    exe = shutil.which("nodemanager")
    cmd = [exe] if exe else [sys.executable, "-m", "nodemanager"]
    done = subprocess.run([*cmd, "matrix", "check"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert f"decide all {DEFAULT_VOCABULARY.size} tuples" in done.stdout
    done = subprocess.run([*cmd, "matrix", "explain", "idle", "open", "boot wait", "idle exceeded"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("(idle, open, boot wait, idle exceeded) -> START_DRAIN")


def test_import_of_policy_matrix_stays_light():
    # what it loads, not how long it takes (timings live in the benchmarks)
    code = "import sys; import policy_matrix; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert not {"json", "difflib", "nodemanager"} & set(done.stdout.split())


def test_diff_exit_code_says_whether_anything_changes(capsys, site, tmp_path):
    changed = tmp_path / "changed.matrix"
    changed.write_text(SITE.replace("idle exceeded -> START_DRAIN", "idle exceeded -> None"))
    assert run(capsys, "diff", "--exit-code", str(site), str(changed))[0] == 1
    assert run(capsys, "diff", "--exit-code", str(site), str(site))[0] == 0
    # without the flag a difference is not a failure (scripts that only print keep working)
    assert run(capsys, "diff", str(site), str(changed))[0] == 0


def test_check_warns_about_a_rule_that_shuts_down_busy_nodes(capsys, site, tmp_path):
    killer = tmp_path / "killer.matrix"
    killer.write_text("busy | * | * | idle exceeded -> START_SHUTDOWN\n" + SITE)
    code, out, err = run(capsys, "check", str(killer))
    assert code == 0 and "1 warning" in out
    assert f"{killer}:1:1: warning: rule shuts down busy nodes" in err
    assert run(capsys, "check", "--strict", str(killer))[0] == 1
    # a catch-all shutdown after 'busy -> None' never reaches a busy node: no warning
    code, out, err = run(capsys, "check", str(site))
    assert code == 0 and "0 warnings" in out and err == ""


def test_version_and_help_for_every_subcommand():
    import argparse

    from nodemanager.cli import build_parser

    out = subprocess.run([sys.executable, "-m", "nodemanager", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("nodemanager ") and out.split()[1][0].isdigit()

    def missing(parser: argparse.ArgumentParser, path: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        found.append(f"{path} {name}")
                    found += missing(sub, f"{path} {name}")
        return found

    assert missing(build_parser(), "nodemanager") == []
