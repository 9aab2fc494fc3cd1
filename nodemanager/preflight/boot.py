"""The boot scripts ``nodemanager check`` reads (``[Cloud Create]`` and each ``[Size]``'s
``user_data``/``user_data_file``): placeholders left in them make VMs that boot and never join."""

from __future__ import annotations

import re
from typing import Iterator

from nodemanager.preflight.checklist import Check
from nodemanager.cloud.libcloud_options import USER_DATA_PLACEHOLDERS
from nodemanager.configuration.settings import Settings

__all__ = ["boot_scripts", "placeholder_checks", "uses_conf_server"]

# markers nodemanager does not fill in, and the domains reserved for examples (RFC 2606)
_MARKER = re.compile(r"@[A-Z][A-Z0-9_]*@")
_EXAMPLE = re.compile(r"\b[\w.-]*\bexample\.(?:org|com|net)\b", re.IGNORECASE)


def boot_scripts(settings: Settings) -> dict[str, str]:
    """Where each boot script comes from (``[Cloud Create] user_data_file /path``) -> its text.
    A file that cannot be read is left out: building the cloud port reports it."""
    sources = [("Cloud Create", settings.cloud.create_args)]
    sources += [(f"Size {s.name}", dict(s.create_args)) for s in settings.core.sizes]
    out: dict[str, str] = {}
    for section, args in sources:
        if args.get("user_data"):
            out[f"[{section}] user_data"] = args["user_data"]
        path = args.get("user_data_file")
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    out[f"[{section}] user_data_file {path}"] = f.read()
            except (OSError, UnicodeDecodeError):
                continue
    return out


def uses_conf_server(scripts: dict[str, str]) -> bool:
    """True when a boot script starts slurmd from slurmctld's configuration (``--conf-server``)."""
    return any("--conf-server" in _code(text) for text in scripts.values())


def _code(text: str) -> str:
    """The script without its comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def placeholder_checks(scripts: dict[str, str]) -> Iterator[Check]:
    """One check per boot script: the lines (comments aside) that still hold an example host or a
    ``@MARKER@`` nodemanager does not replace."""
    for where, text in scripts.items():
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            left = [m for m in _MARKER.findall(line) if m not in USER_DATA_PLACEHOLDERS]
            left += _EXAMPLE.findall(line)
            if left:
                found.append(f"line {number}: {line.strip()[:80]!r} ({', '.join(left)})")
        if found:
            yield Check("boot script", False, f"{where}: placeholders left: {'; '.join(found[:5])}",
                        "put your site's values in the script (nodemanager fills in only "
                        f"{', '.join(USER_DATA_PLACEHOLDERS)})")
        else:
            yield Check("boot script", True, f"{where}: no placeholders left")
