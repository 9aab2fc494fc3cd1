"""The ``[Cloud]`` and ``[Cloud Create]`` reader, and the checks of a cloud's settings: a known
driver with its image, markets its sizes can use, no example value on a cloud that bills, and a
cluster name and deployment id fit to share an account."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from nodemanager.configuration.kinds import cloud_kind, cloud_kinds, in_process
from nodemanager.configuration.options import (CLOUD_CREATE_NUMBERS, CLOUD_DRIVER_NUMBERS, CLOUD_NUMBERS,
                                               CLOUD_OWN as _CLOUD_OWN, EXAMPLE_VALUES, SECRET_OPTIONS)
from nodemanager.configuration.reader import Reader as _Reader
from nodemanager.configuration.reader import suggest as _suggest
from nodemanager.configuration.settings import CloudSettings
from nodemanager.model import Size, frozen_map

__all__ = ["cloud_settings", "check_markets", "check_real_cloud", "check_identity"]


_DEPLOYMENT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_markets(r: _Reader, driver: str, sizes: list[Size]) -> None:
    kind = cloud_kind(driver)
    if kind is None:
        return  # an unknown driver: said at [Cloud] driver
    for size in sizes:
        problem = kind.market_problem(driver, size)
        if problem:
            r.problem(f"Size {size.name}", *problem)


def cloud_settings(r: _Reader, section: str = "Cloud") -> CloudSettings:
    own_schema: dict[str, Callable[[str], Any]] = {
        "driver": lambda v: v.strip().lower(), "cluster": str, "node_name_template": str,
        **CLOUD_NUMBERS, "deployment_id": lambda v: v.strip(),
    }
    own = r.typed(section, own_schema, open_ended=True)
    # libcloud constructor arguments stay text: the cloud adapter converts them when it is built;
    # the numeric ones are range-checked here, at their lines, at load and on reload
    args = {option: raw for option, raw in r.cp.items(section, raw=True)
            if option not in _CLOUD_OWN} if r.cp.has_section(section) else {}
    r.typed(section, {o: p for o, p in CLOUD_DRIVER_NUMBERS.items() if o in args}, open_ended=True)
    r.typed("Cloud Create", CLOUD_CREATE_NUMBERS, open_ended=True)
    create: dict[str, str] = {}
    tags: dict[str, str] = {}
    if r.cp.has_section("Cloud Create"):
        for option, raw in r.cp.items("Cloud Create", raw=True):
            if option.startswith("tag_"):
                tags[option[4:]] = raw
            else:
                create[option] = raw
    # a named cloud's sizes may each bring their own image (a mix of providers): checked with them
    _check_driver(r, own.get("driver", CloudSettings.driver), create if section == "Cloud" else {"image": "-"},
                  section)
    template = own.get("node_name_template", CloudSettings.node_name_template)
    try:
        template.format(cluster="c", size="s", seq=1)
    except (KeyError, IndexError, ValueError) as exc:
        r.problem(section, "node_name_template",
                  f"may use only {{cluster}}, {{size}} and {{seq}} ({exc})")
    else:
        if "{seq}" not in template:
            r.problem(section, "node_name_template", "must contain {seq}, or every VM of a size "
                      "would get the same name")
    name = section[len("Cloud "):].strip() if section != "Cloud" else ""
    return CloudSettings(driver_args=frozen_map(args), create_args=frozen_map(create),
                         tags=frozen_map(tags), name=name, **own)


def check_real_cloud(r: _Reader) -> None:
    """On a cloud that bills: every size says its price, and no example value is left in place."""
    for section in r.cp.sections():
        if section.startswith("Size ") and not any(r.cp.has_option(section, o) for o in ("price", "price_override")):
            r.problem(section, None, "missing required option price: the hourly price the cloud "
                      "charges (price = 0 for a size that costs nothing), else every decision and "
                      "cap would take it as free")
    for section, option, value in _example_values(r):
        shown = "the value" if option in SECRET_OPTIONS else repr(value)
        r.problem(section, option, f"{shown} is the example's placeholder, not this site's value: "
                  "set the real one")


def _example_values(r: _Reader) -> list[tuple[str, str, str]]:
    """The (section, option, value) left at an example value of config.example.ini or the quickstarts."""
    found = []
    for section in r.cp.sections():
        if section not in ("Cloud", "Cloud Create") and not section.startswith("Size "):
            continue
        for option, raw in r.cp.items(section, raw=True):
            value = raw.strip()
            if (option, value.lower()) in EXAMPLE_VALUES or (value.startswith("<") and value.endswith(">")):
                found.append((section, option, value))
    return found


def check_identity(r: _Reader, cloud: CloudSettings, ha: bool) -> None:
    """A real cloud's cluster name is not the default one, and [HA] heads name their deployment."""
    if cloud.deployment_id and not _DEPLOYMENT_ID.fullmatch(cloud.deployment_id):
        r.problem("Cloud", "deployment_id", "use 1-64 letters, digits, '.', '-' or '_'")
    if cloud_kind(cloud.driver) is not None and not in_process(cloud.driver) and cloud.cluster == CloudSettings.cluster:
        r.problem(f"Cloud {cloud.name}" if cloud.name else "Cloud", "cluster", f"is {CloudSettings.cluster!r}, the default: another site on "
                  "the same cloud account may use it too; choose a name for this pool (it starts "
                  "every VM name and is the cloud tag nodemanager-cluster)")
    if ha and not cloud.deployment_id:
        r.problem("Cloud", "deployment_id", "required with [HA]: every head node of this deployment "
                  "must carry the same id (for instance the output of `uuidgen`)")


def _check_driver(r: _Reader, driver: str, create: Mapping[str, str], section: str = "Cloud") -> None:
    """An unknown ``[Cloud] driver`` or a missing ``[Cloud Create] image``, at their lines."""
    kind = cloud_kind(driver)
    if kind is None:
        known = tuple(d for k in cloud_kinds().values() for d in k.drivers)
        r.problem(section, "driver", f"unknown driver {driver!r}" + _suggest(driver, known))
    elif kind.image_required(driver) and not create.get("image", "").strip():
        r.problem("Cloud Create", "image", f"required for driver {driver}", at=(section, "driver"))
