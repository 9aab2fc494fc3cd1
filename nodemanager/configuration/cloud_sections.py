"""``[Cloud NAME]`` sections: several clouds (providers, regions, accounts) in one deployment.

Each named section starts from the ``[Cloud]`` options it does not set itself (credentials, rate
limits, breakers, the cluster tag) and shares ``[Cloud Create]``; ``deployment_id`` is the
deployment's, never a cloud's. Every ``[Size NAME]`` then names its cloud (``cloud = NAME``; with
one named cloud it may leave it out). Without named sections the one ``[Cloud]`` is the cloud.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Sequence

from nodemanager.configuration.kinds import cloud_kind
from nodemanager.configuration.reader import Reader
from nodemanager.configuration.settings import CloudSettings
from nodemanager.model import Size

__all__ = ["named_clouds", "CLOUD_NAME"]

# a cloud's name starts its nodes' ids (NAME:<id>) and labels its metrics
CLOUD_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def named_clouds(r: Reader, base: CloudSettings, sizes: Sequence[Size],
                 parse: Callable[[Reader, str], CloudSettings]) -> tuple[tuple[CloudSettings, ...], list[Size]]:
    """The ``[Cloud NAME]`` sections in file order, and ``sizes`` each with its cloud; problems
    (a bad name, a simulated cloud among named ones, a size naming no such cloud) at their lines."""
    sections = [s for s in r.cp.sections() if s.startswith("Cloud ") and s != "Cloud Create"]
    clouds: list[CloudSettings] = []
    for section in sections:
        name = section[len("Cloud "):].strip()
        if not CLOUD_NAME.fullmatch(name):
            r.problem(section, None, "a cloud's name is 1-32 letters, digits, '-' or '_'")
            continue
        if r.cp.has_option(section, "deployment_id"):
            r.problem(section, "deployment_id", "is the deployment's: set it in [Cloud] only")
        if r.cp.has_section("Cloud"):  # inherited: what the named section does not set itself
            for option, raw in r.cp.items("Cloud", raw=True):
                if option != "max_nodes" and not r.cp.has_option(section, option):
                    r.cp.set(section, option, raw)
        cloud = replace(parse(r, section), create_args=base.create_args, tags=base.tags,
                        deployment_id=base.deployment_id)
        if cloud.driver == "simulated":
            r.problem(section, "driver", "a named cloud is a real one: the simulated cloud is the "
                      "one [Cloud] (`simulate --clouds` replays several)")
        clouds.append(cloud)
    names = [c.name for c in clouds]
    out: list[Size] = []
    for size in sizes:
        if not size.cloud and len(names) == 1:
            size = replace(size, cloud=names[0])
        elif not clouds and size.cloud:
            r.problem(f"Size {size.name}", "cloud", f"names cloud {size.cloud!r}, but there is no "
                      "[Cloud NAME] section")
        elif clouds and size.cloud not in names:
            what = f"names cloud {size.cloud!r}" if size.cloud else "names no cloud"
            r.problem(f"Size {size.name}", "cloud" if size.cloud else None,
                      f"{what}: with several clouds each size sets cloud = one of " + ", ".join(names))
        named = next((c for c in clouds if c.name == size.cloud), None)
        kind = cloud_kind(named.driver) if named is not None else None
        if (named is not None and kind is not None and kind.image_required(named.driver)
                and not base.create_args.get("image", "").strip()
                and not dict(size.create_args).get("image", "").strip()):
            r.problem(f"Size {size.name}", None, f"no image: cloud {named.name} (driver {named.driver}) "
                      "needs [Cloud Create] image or this size's own image")
        out.append(size)
    return tuple(clouds), out
