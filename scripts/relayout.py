#!/usr/bin/env python3
"""Rewrite references to modules that moved into the package's folders, across the tree.

The package root of ``nodemanager`` was grouped into folders that match the flow picture in
docs/architecture.md: the controller cycle and its memories (``cycle/``), what operators read and
call (``console/``), configuration (``configuration/``), the ClassAd language (``classad/``).
:data:`MOVES` maps each old module to its new place. The script rewrites, in code, tests,
benchmarks, docs, deploy files and packaging files:

* dotted names: ``nodemanager.controller`` -> ``nodemanager.cycle.controller`` (imports, strings
  given to ``monkeypatch``/``importlib``, ``:mod:`` references);
* ``from nodemanager import config`` -> ``from nodemanager.configuration import config``;
* file paths: ``nodemanager/controller.py`` -> ``nodemanager/cycle/controller.py``.

It is idempotent: no new name contains an old one, so a second run changes nothing. Run it from
the checkout's top folder after merging a branch written against the old layout:

    python3 scripts/relayout.py            # rewrite in place, list the files changed
    python3 scripts/relayout.py --check    # exit 1 if anything still names an old module
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

# old module -> new module (both under nodemanager); each new name is unique and contains no old one
MOVES: dict[str, str] = {
    # the controller cycle and the memories it keeps between cycles
    "controller": "cycle.controller",
    "controller_inputs": "cycle.controller_inputs",
    "actuate": "cycle.actuate",
    "actuator_memory": "cycle.actuator_memory",
    "journal": "cycle.journal",
    "lock": "cycle.lock",
    "drain_tickets": "cycle.drain_tickets",
    "idle_memory": "cycle.idle_memory",
    "identity": "cycle.deployment",
    # what operators read and call: status page, metrics, history, decision log, admin API, HTTP
    "status": "console.status",
    "status_document": "console.status_document",
    "metrics": "console.metrics",
    "history": "console.history",
    "decision_log": "console.decision_log",
    "admin": "console.admin",
    "http_server": "console.http_server",
    "summary": "console.summary",
    "whynot": "console.whynot",
    # (``nodemanager.console``, the page's HTML, became ``console/page.py``; the console package
    # hands on ``render_html``, so imports of it need no rewrite)
    # configuration: option tables, parsing, settings
    "config": "configuration.config",
    "config_values": "configuration.values",
    "settings": "configuration.settings",
    # the ClassAd expression language, shared by the HTCondor adapter, the simulator and the core
    "classad_eval": "classad.expressions",
    "classad_values": "classad.values",
    # progress bars of long replays and benchmarks
    "progress": "sim.progress",
}

# paths only: the page's module (its dotted name is now the console package, which hands on its
# names) and the shipped profiles, which moved beside the configuration that reads them
PATH_MOVES: dict[str, str] = {
    "nodemanager/console.py": "nodemanager/console/page.py",
    "nodemanager/profiles/": "nodemanager/configuration/profiles/",
}

# file kinds that can name a module or its path
SUFFIXES = (".py", ".md", ".ini", ".cfg", ".toml", ".txt", ".sh", ".yml", ".yaml", ".rst", ".json")
NAMES = (".ci/run", "scripts/test")
SKIP_DIRS = {".git", "__pycache__", ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs"}
# this script and its test name old modules on purpose
KEEP = ("scripts/relayout.py", "tests/test_relayout.py")

_DOTTED = re.compile(r"(?<![\w.])nodemanager\.(" + "|".join(sorted(MOVES, key=len, reverse=True))
                     + r")(?!\w)")
_PATH = re.compile(r"(?<![\w/.])nodemanager/(" + "|".join(sorted(MOVES, key=len, reverse=True))
                   + r")\.py\b")
_PATH_ONLY = re.compile(r"(?<![\w/.])(" + "|".join(re.escape(p) for p in PATH_MOVES) + r")(?:(?<=/)|(?![\w/]))")
_FROM_ROOT = re.compile(r"^(?P<indent>[ \t]*)from nodemanager import (?P<names>[\w ,]+?)[ \t]*$",
                        re.MULTILINE)


def _from_root(m: re.Match[str]) -> str:
    """``from nodemanager import a, b as c``: moved names come from their new package."""
    kept: list[str] = []
    lines: list[str] = []
    for item in (i.strip() for i in m["names"].split(",") if i.strip()):
        name, _, alias = (p.strip() for p in item.partition(" as "))
        if name not in MOVES:
            kept.append(item)
            continue
        package, _, module = MOVES[name].rpartition(".")
        bound = alias or name
        lines.append(f"from nodemanager.{package} import {module}"
                     + (f" as {bound}" if bound != module else ""))
    if kept:
        lines.insert(0, "from nodemanager import " + ", ".join(kept))
    return "\n".join(m["indent"] + line for line in lines)


# a logger's name is what operators' log lines and logging configs show: it stays as it is
_LOGGER_LINE = re.compile(r"log|\.name\b")


def _dotted(m: re.Match[str]) -> str:
    text = m.string
    quoted = text[m.start() - 1:m.start()] in "\"'" and text[m.end():m.end() + 1] in "\"'"
    if quoted and m.start() > 0:
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]
        if _LOGGER_LINE.search(line):
            return m[0]
    return "nodemanager." + MOVES[m[1]]


def rewrite(text: str) -> str:
    """``text`` with every reference to a moved module pointing at its new place (logger names,
    which operators see, are left alone)."""
    text = _DOTTED.sub(_dotted, text)
    text = _PATH.sub(lambda m: "nodemanager/" + MOVES[m[1]].replace(".", "/") + ".py", text)
    text = _PATH_ONLY.sub(lambda m: PATH_MOVES[m[1]], text)
    return _FROM_ROOT.sub(_from_root, text)


def files(top: pathlib.Path) -> list[pathlib.Path]:
    out = []
    for path in sorted(top.rglob("*")):
        parts = path.relative_to(top).parts
        # pip's *.egg-info is rebuilt on install and may list an older tree's files
        if SKIP_DIRS.intersection(parts) or any(p.endswith(".egg-info") for p in parts) or not path.is_file():
            continue
        rel = path.relative_to(top).as_posix()
        if rel in KEEP:
            continue
        if path.suffix in SUFFIXES or rel in NAMES:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="the checkout's top folder (default: .)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 and list the files that name an old module")
    args = parser.parse_args(argv)
    top = pathlib.Path(args.root).resolve()
    changed = []
    for path in files(top):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text)
        if new != text:
            changed.append(path.relative_to(top).as_posix())
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for name in changed:
        print(name)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
