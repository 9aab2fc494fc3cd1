"""``man nodemanager``: the manual page is made from the command line's own parser (scripts/manpage,
argparse-manpage), is current with it, and a wheel built from a fresh checkout installs it in
share/man/man1."""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from nodemanager.cli import build_parser
from tests.docs_run import fresh_checkout

REPO = pathlib.Path(__file__).resolve().parent.parent
PAGE = REPO / "man" / "nodemanager.1"


def _options() -> dict[str, set[str]]:
    """Each verb of the parser (and its sub-verbs) with its long options."""
    out: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    walk(sub, f"{name} {verb}")
            else:
                out.setdefault(name, set()).update(o for o in action.option_strings
                                                   if o.startswith("--") and o != "--help")
    walk(build_parser(), "nodemanager")
    return out


def test_the_page_is_current_with_the_parser_and_names_every_verb_and_option():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "manpage"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = PAGE.read_text().replace("\\-", "-")
    for verb, options in _options().items():
        assert f"'{verb}'" in text or verb == "nodemanager", verb
        for option in options:
            assert option in text, (verb, option)
    assert "hold" in text and "--reason" in text and "--live" in text


@pytest.mark.skipif(shutil.which("man") is None, reason="no man(1)")
def test_man_renders_the_page():
    r = subprocess.run(["man", "-l", str(PAGE)], capture_output=True, text=True, timeout=60,
                       env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert r.returncode == 0 and "nodemanager - elastic cloud node manager" in r.stdout
    assert "nodemanager plan" in r.stdout and "--live" in r.stdout


@pytest.mark.slow
def test_a_wheel_from_a_fresh_checkout_installs_the_page(tmp_path):
    checkout = fresh_checkout(tmp_path / "checkout")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(tmp_path / "dist"), str(checkout)], check=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("batch_nodemanager-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    [page] = [n for n in names if n.endswith("/data/share/man/man1/nodemanager.1")]
    assert zipfile.ZipFile(wheel).read(page).decode() == PAGE.read_text()
