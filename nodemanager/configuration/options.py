"""The configuration's option tables: what each INI section accepts and how its values parse.

A section's table maps each option to its parser (and, for ``[Daemon]``, the
:class:`~nodemanager.configuration.settings.CoreSettings` field it sets); a parser raises
ValueError with the words the error message shows. ``config.example.ini`` documents every option.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from nodemanager.configuration.kinds import scheduler_kinds
from nodemanager.configuration.values import (Ranged, address, amount, choice, count, parse_attributes,
                                              parse_bool, parse_host_names, parse_minutes, parse_names,
                                              seconds, share)

__all__ = ["MAX_BYTES", "EXAMPLE_VALUES", "NUMBERS", "CLOUD_NUMBERS", "CLOUD_DRIVER_NUMBERS",
           "CLOUD_CREATE_NUMBERS", "SECRET_OPTIONS", "CLOUD_OWN", "DAEMON", "DAEMON_SHELL",
           "POLL", "DRAIN", "MANAGE", "SIZE", "SIZE_CREATE_OPTIONS", "HA", "STORE", "SECTIONS", "PROFILE_DIR",
           "PROFILES"]

MAX_BYTES = 1024 * 1024
"""Largest config file accepted: 1 MiB (the full example is 10 KB); larger ones are refused unread."""


# Options whose values are secrets: never logged, shown or put in error messages.
SECRET_OPTIONS = frozenset({"key", "secret", "password", "token", "secret_key", "access_key",
                            "client_secret", "ex_token", "auth_token"})

# Every number has a finite range (docs/configuration.md lists them all, from these tables).
NODES = count(100_000)
PRICE = amount(0.000001, 1_000_000)            # per hour: 0, or a price a cloud could charge
SPAN = seconds(0.001, 365 * 86400)             # graces, horizons, lifetimes: 0 (off) up to a year
INTERVAL = seconds(0.01, 86400, zero=False)    # how often something runs: never 0 (a busy loop)

# [Cloud] options of our own that are numbers, and libcloud constructor arguments that are.
CLOUD_NUMBERS: Mapping[str, Ranged] = {
    "calls_per_second": amount(0.1, 1000), "quota_backoff": SPAN,
    "capacity_cooldown": SPAN, "capacity_max_cooldown": SPAN, "max_nodes": NODES,
}
CLOUD_CREATE_NUMBERS: Mapping[str, Ranged] = {"spot_max_price": PRICE, "disk_size": count(65536, low=1)}
CLOUD_DRIVER_NUMBERS: Mapping[str, Ranged] = {
    "port": count(65535, low=1), "timeout": amount(0.1, 3600, zero=False),
    "retry_delay": amount(0.01, 3600), "backoff": amount(0.01, 3600),
}

# (option, value) pairs of config.example.ini that only stand for a site's own value: refused on
# a real cloud, as is any `<...>` placeholder of the quickstarts whatever the option.
EXAMPLE_VALUES = frozenset({("image", "ami-0123456789abcdef0"), ("key_name", "cluster-key"),
                            ("subnet", "subnet-0123"), ("cluster", "demo")})

CLOUD_OWN = frozenset({"driver", "cluster", "node_name_template", "calls_per_second",
                        "quota_backoff", "deployment_id", "capacity_cooldown", "capacity_max_cooldown",
                        "max_nodes"})


DAEMON: dict[str, tuple[str, Callable[[str], Any]]] = {
    # option: (CoreSettings field, parser)
    "min_nodes": ("min_nodes", NODES),
    "max_nodes": ("max_nodes", NODES),
    "max_total_price": ("max_total_price", PRICE),
    "boot_grace": ("boot_grace", SPAN),
    "idle_grace": ("idle_grace", SPAN),
    "paid_idle_after": ("paid_idle_after", SPAN),
    "node_stale_after": ("node_stale_after", SPAN),
    "poll_stale_after": ("poll_stale_after", SPAN),
    "max_concurrent_drains": ("max_concurrent_drains", NODES),
    "max_destroys_per_hour": ("max_destroys_per_hour", count(1_000_000)),
    "max_boots_per_hour": ("max_boots_per_hour", count(1_000_000)),
    "down_freeze_count": ("down_freeze_count", NODES),
    "down_freeze_fraction": ("down_freeze_fraction", amount(0.0001, 1)),
    "node_mem_scaling": ("node_mem_scaling", amount(0.01, 1, zero=False)),
    "victim_horizon": ("victim_horizon", SPAN),
    "clock_tolerance": ("clock_tolerance", SPAN),
    "max_clock_skew": ("max_clock_skew", SPAN),
    "reclaim_penalty": ("reclaim_penalty", SPAN),
    "max_rerun_share": ("max_rerun_share", share()),
    "reclaim_prior": ("reclaim_prior", seconds(1, 3650 * 86400)),
    "protect_after_failed_boots": ("protect_after_failed_boots", count(1000)),
    "protect_backoff": ("protect_backoff", SPAN),
    "protect_max_backoff": ("protect_max_backoff", SPAN),
    "consolidate": ("consolidate", parse_bool),
    "consolidate_margin": ("consolidate_margin", count(1_000_000)),
    "min_lifetime": ("min_lifetime", SPAN),
    "max_lifetime": ("max_lifetime", SPAN),
    "rebuy_hold": ("rebuy_hold", SPAN),
    "idle_grace_mode": ("idle_grace_mode", choice("fixed", "break-even")),
    "idle_timing": ("idle_timing", choice("money", "wait")),
    "wait_grace": ("wait_grace", choice("fixed", "arrivals")),
    "arrival_chance": ("arrival_chance", share()),
    "arrival_window": ("arrival_window", SPAN),
    "steering": ("steering", parse_bool),
    # runtime prediction (nodemanager.core.runtime_prediction)
    "runtime_prediction": ("runtime_prediction", choice("off", "recent", "auto")),
    "consolidate_backoff": ("consolidate_backoff", parse_bool),
}
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
PROFILES = tuple(sorted(f[:-4] for f in os.listdir(PROFILE_DIR) if f.endswith(".ini")))
DAEMON_SHELL: dict[str, Callable[[str], Any]] = {"matrix": str, "dry_run": parse_bool,
                 "profile": lambda t: choice(*PROFILES)(t) if t.strip() else "",
                 "log_level": choice("debug", "info", "warning", "error"),
                 # where the log goes besides stderr, and as what (nodemanager.commands.run)
                 "log_format": choice("text", "json"), "log_file": str,
                 "log_file_max_mb": count(10240, low=1), "log_file_keep": count(100, low=1)}
POLL: dict[str, Callable[[str], Any]] = {
    "cloud_interval": INTERVAL, "scheduler_interval": INTERVAL,
    "cycle_interval": INTERVAL, "max_backoff": INTERVAL, "watchdog": seconds(1, 86400, zero=False),
}
DRAIN: dict[str, Callable[[str], Any]] = {
    "schedule": choice("graceful", "quick", "fast"), "escalate_quick": str,
    "escalate_fast": str, "deadline": SPAN,
    "reclaim_foreign_after": SPAN,    # a CoreSettings field: the plan decides on it
}
MANAGE: dict[str, Callable[[str], Any]] = {"address": address, "port": count(65535, low=-1), "token": str,
                                            "state_file": str, "state_dir": str,
                                            "allowed_hosts": parse_host_names,
                                            "spend_ledger": parse_bool, "spend_top": count(1000),
                                            "loopback_snapshot": parse_bool}
SIZE: dict[str, Callable[[str], Any]] = {
    "cores": count(100_000), "ram_mb": count(1_000_000_000), "price": PRICE,
    "scratch_mb": count(10_000_000_000), "billing_period": SPAN,
    "min_charge": SPAN, "shutdown_window": SPAN,
    "shutdown_windows": parse_minutes, "instance_type": str,
    "market": choice("on-demand", "spot"), "max_price": PRICE,
    "interruptions_per_day": amount(0.000001, 10_000),
    # what the size offers jobs, its own node limits and create options
    "gpus": count(1024), "gpu_type": str, "features": parse_names,
    "attributes": parse_attributes, "partitions": parse_names,
    "min_nodes": NODES, "max_nodes": NODES,
    "warm_nodes": NODES, "warm_cores": count(10_000_000),
    "warm_schedule": str, "warm_duration": SPAN, "warm_time_zone": str,
    # what a node of the size really costs: a reservation or savings plan rate, a licence per VM
    "price_override": PRICE, "licence_price": PRICE,
    # the [Cloud NAME] it is bought from (several clouds)
    "cloud": lambda v: v.strip(),
}
# [Cloud Create] options a [Size NAME] may override (a GPU size needs another image); tag_* too
SIZE_CREATE_OPTIONS = ("image", "user_data", "user_data_file")
HA: dict[str, Callable[[str], Any]] = {
    "backend": choice("etcd"), "endpoints": lambda t: tuple(e.strip() for e in t.split(",") if e.strip()),
    "ca_file": str, "cert_file": str, "key_file": str, "user": str, "password": str,
    "lease_ttl": seconds(1, 3600, zero=False), "stop_margin": seconds(0.001, 3600), "election_key": str, "admin_key": str,
    "deployment": str,
    "timeout": seconds(0.01, 300, zero=False),
}
STORE: dict[str, Callable[[str], Any]] = {
    "url": str, "keep_ledger": seconds(86400, 100 * 365 * 86400, zero=False), "keep_events": seconds(86400, 100 * 365 * 86400, zero=False),
    "keep_gone": seconds(86400, 100 * 365 * 86400, zero=False), "buffer": count(100_000_000, low=1000),
}
SECTIONS = ("Daemon", "Polling", "Drain", "Cloud", "Cloud Create", "Scheduler", "Manage", "HA", "Store")


def numbers() -> dict[tuple[str, str], Ranged]:
    """Every numeric option as (section, option) -> its parser and range; ``[Size NAME]`` and
    ``[Scheduler]`` (per type, as ``Scheduler type``) once each."""
    out: dict[tuple[str, str], Ranged] = {}
    tables: list[tuple[str, Mapping[str, Any]]] = [
        ("Daemon", {k: v[1] for k, v in DAEMON.items()}), ("Polling", POLL), ("Drain", DRAIN),
        ("Manage", MANAGE), ("Size NAME", SIZE), ("HA", HA), ("Store", STORE), ("Cloud", {**CLOUD_NUMBERS, **CLOUD_DRIVER_NUMBERS}),
        ("Cloud Create", CLOUD_CREATE_NUMBERS),
        *((f"Scheduler {name}", kind.numbers) for name, kind in scheduler_kinds().items())]
    for section, table in tables:
        out.update(((section, option), parse) for option, parse in table.items() if isinstance(parse, Ranged))
    return out


NUMBERS = numbers()
