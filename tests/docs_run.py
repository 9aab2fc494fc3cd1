"""Running a document's shell blocks as an operator would: on a "head node" in a folder (the
site's install paths under one root), from a fresh checkout of this tree, each block in order
with bash, as root; the systemd unit, where systemd cannot run, as its ExecStart under its User
with its Environment (drop-ins included)."""

from __future__ import annotations

import configparser
import os
import pathlib
import re
import shlex
import subprocess
import tempfile
import textwrap

REPO = pathlib.Path(__file__).resolve().parent.parent
# the head node's paths the docs use: the site's own, here under the test's root
SITE_PATHS = ("/opt/nodemanager", "/etc/nodemanager", "/var/lib/nodemanager", "/usr/local/bin",
              "/etc/systemd/system", "/usr/lib/sysusers.d")
SYSTEMCTL = re.compile(r"^systemctl daemon-reload && systemctl enable --now nodemanager$", re.M)


def fresh_checkout(dest: pathlib.Path) -> pathlib.Path:
    """``git clone`` of this tree into ``dest``, with its uncommitted work as it stands."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, timeout=120)
    diff = subprocess.run(["git", "-C", str(REPO), "diff", "HEAD", "--binary"], check=True,
                          capture_output=True, timeout=60).stdout
    if diff:
        subprocess.run(["git", "-C", str(dest), "apply", "-"], input=diff, check=True, timeout=60)
    untracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "--others", "--exclude-standard"],
                               check=True, capture_output=True, text=True, timeout=60).stdout.split()
    for name in untracked:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes((REPO / name).read_bytes())
    return dest


def shell_blocks(doc: pathlib.Path) -> list[str]:
    """The ```sh blocks of ``doc`` in order (indented ones in lists too), dedented."""
    return [textwrap.dedent(body) for _, body in
            re.findall(r"^( *)```sh\n(.*?)^\1```", doc.read_text(), re.S | re.M)]


def ini_block(doc: pathlib.Path) -> str:
    (block,) = re.findall(r"```ini\n(.*?)```", doc.read_text(), re.S)
    return block


class HeadNode:
    """A head node in a folder: ``root`` holds the site's paths, ``checkout`` the fresh clone."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.checkout = fresh_checkout(root / "src" / "nodemanager")
        self.env = {"PATH": f"{root}/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "HOME": "/root", "LANG": "C.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        for folder in ("usr/local/bin", "etc/systemd/system", "var/lib", "usr/lib/sysusers.d"):  # as on a host
            (root / folder).mkdir(parents=True, exist_ok=True)

    @classmethod
    def make(cls) -> "HeadNode":
        root = pathlib.Path(tempfile.mkdtemp(prefix="headnode-", dir="/tmp"))
        root.chmod(0o755)            # the service user walks into it, as into /
        return cls(root)

    def site(self, text: str) -> str:
        """``text`` with the site's paths under this head node's root."""
        for path in SITE_PATHS:
            text = re.sub(rf"(?<![\w/.-]){re.escape(path)}(?=[/\s:'\"]|$)", f"{self.root}{path}", text,
                          flags=re.M)
        return text

    def run(self, block: str, *, timeout: float = 600, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """One block with bash (stop at the first failing command), as root, in the checkout."""
        return subprocess.run(["bash", "-euo", "pipefail", "-c", self.site(block)], cwd=self.checkout,
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout)

    def localize(self, *folders: str) -> None:
        """The site's paths in the text files installed under ``folders`` (a unit, a config)."""
        for folder in folders:
            for path in (self.root / folder.lstrip("/")).rglob("*"):
                if path.is_file() and not path.is_symlink():
                    try:
                        text = path.read_text()
                    except (UnicodeDecodeError, PermissionError):
                        continue
                    if self.site(text) != text:
                        stat = path.stat()
                        path.write_text(self.site(text))
                        os.chown(path, stat.st_uid, stat.st_gid)

    def unit(self, name: str = "nodemanager.service") -> dict[str, list[str]]:
        """The installed unit's [Service] options, its drop-ins' after it (systemd's order)."""
        folder = self.root / "etc/systemd/system"
        files = [folder / name, *sorted((folder / f"{name}.d").glob("*.conf"))]
        options: dict[str, list[str]] = {}
        for path in files:
            parser = configparser.RawConfigParser(strict=False, interpolation=None)
            parser.optionxform = str  # type: ignore[assignment,method-assign]
            parser.read_string(self.site(path.read_text()))
            if parser.has_section("Service"):
                for key, value in parser.items("Service"):
                    options.setdefault(key, []).append(value)
        return options

    def start_unit(self, log: pathlib.Path) -> subprocess.Popen[bytes]:
        """The unit's ExecStart as its User, with its Environment, WorkingDirectory and UMask."""
        unit = self.unit()
        env = ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]
        for line in unit.get("Environment", []):
            env += shlex.split(line)
        command = (f"umask {unit.get('UMask', ['0022'])[-1]} && cd {shlex.quote(unit['WorkingDirectory'][-1])}"
                   f" && exec env -i {' '.join(map(shlex.quote, env))} {unit['ExecStart'][-1]}")
        with open(log, "wb") as out:
            return subprocess.Popen(["runuser", "-u", unit["User"][-1], "--", "sh", "-c", command],
                                    stdout=out, stderr=subprocess.STDOUT)
