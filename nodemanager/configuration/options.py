"""The configuration's option tables: what each INI section accepts and how its values parse.

A section's table maps each option to its parser (and, for ``[Daemon]``, the
:class:`~nodemanager.configuration.settings.CoreSettings` field it sets); a parser raises
ValueError with the words the error message shows. ``config.example.ini`` documents every option.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from nodemanager.configuration.values import (address, choice, nonneg, parse_attributes, parse_bool,
                                              parse_duration, parse_float, parse_host_names, parse_int,
                                              parse_minutes, parse_names, parse_share)

__all__ = ["MAX_BYTES", "SECRET_OPTIONS", "CLOUD_OWN", "DAEMON", "DAEMON_SHELL",
           "POLL", "DRAIN", "MANAGE", "SIZE", "SIZE_CREATE_OPTIONS", "HA", "SECTIONS", "PROFILE_DIR",
           "PROFILES"]

MAX_BYTES = 1024 * 1024
"""Largest config file accepted: 1 MiB (the full example is 10 KB); larger ones are refused unread."""


# Options whose values are secrets: never logged, shown or put in error messages.
SECRET_OPTIONS = frozenset({"key", "secret", "password", "token", "secret_key", "access_key",
                            "client_secret", "ex_token", "auth_token"})

CLOUD_OWN = frozenset({"driver", "cluster", "node_name_template", "calls_per_second",
                        "quota_backoff", "deployment_id", "capacity_cooldown", "capacity_max_cooldown"})


DAEMON: dict[str, tuple[str, Callable[[str], Any]]] = {
    # option: (CoreSettings field, parser)
    "min_nodes": ("min_nodes", nonneg(parse_int)),
    "max_nodes": ("max_nodes", nonneg(parse_int)),
    "max_total_price": ("max_total_price", nonneg(parse_float)),
    "boot_grace": ("boot_grace", parse_duration),
    "idle_grace": ("idle_grace", parse_duration),
    "node_stale_after": ("node_stale_after", parse_duration),
    "poll_stale_after": ("poll_stale_after", parse_duration),
    "max_concurrent_drains": ("max_concurrent_drains", nonneg(parse_int)),
    "max_destroys_per_hour": ("max_destroys_per_hour", nonneg(parse_int)),
    "down_freeze_count": ("down_freeze_count", nonneg(parse_int)),
    "down_freeze_fraction": ("down_freeze_fraction", nonneg(parse_float)),
    "node_mem_scaling": ("node_mem_scaling", nonneg(parse_float)),
    "victim_horizon": ("victim_horizon", parse_duration),
    "clock_tolerance": ("clock_tolerance", parse_duration),
    "max_clock_skew": ("max_clock_skew", parse_duration),
    "reclaim_penalty": ("reclaim_penalty", parse_duration),
    "max_rerun_share": ("max_rerun_share", parse_share),
    "reclaim_prior": ("reclaim_prior", parse_duration),
    "protect_after_failed_boots": ("protect_after_failed_boots", nonneg(parse_int)),
    "protect_backoff": ("protect_backoff", parse_duration),
    "protect_max_backoff": ("protect_max_backoff", parse_duration),
    "consolidate": ("consolidate", parse_bool),
    "consolidate_margin": ("consolidate_margin", nonneg(parse_int)),
    "min_lifetime": ("min_lifetime", parse_duration),
    "max_lifetime": ("max_lifetime", parse_duration),
    "rebuy_hold": ("rebuy_hold", parse_duration),
    "idle_grace_mode": ("idle_grace_mode", choice("fixed", "break-even")),
    "idle_timing": ("idle_timing", choice("money", "wait")),
    "wait_grace": ("wait_grace", choice("fixed", "arrivals")),
    "arrival_chance": ("arrival_chance", parse_share),
    "arrival_window": ("arrival_window", parse_duration),
    "steering": ("steering", parse_bool),
    # runtime prediction (nodemanager.core.runtime_prediction)
    "runtime_prediction": ("runtime_prediction", choice("off", "recent")),
    "consolidate_backoff": ("consolidate_backoff", parse_bool),
}
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
PROFILES = tuple(sorted(f[:-4] for f in os.listdir(PROFILE_DIR) if f.endswith(".ini")))
DAEMON_SHELL: dict[str, Callable[[str], Any]] = {"matrix": str, "dry_run": parse_bool,
                 "profile": lambda t: choice(*PROFILES)(t) if t.strip() else "",
                 "log_level": choice("debug", "info", "warning", "error")}
POLL: dict[str, Callable[[str], Any]] = {
    "cloud_interval": parse_duration, "scheduler_interval": parse_duration,
    "cycle_interval": parse_duration, "max_backoff": parse_duration, "watchdog": parse_duration,
}
DRAIN: dict[str, Callable[[str], Any]] = {
    "schedule": choice("graceful", "quick", "fast"), "escalate_quick": str,
    "escalate_fast": str, "deadline": parse_duration,
    "reclaim_foreign_after": parse_duration,    # a CoreSettings field: the plan decides on it
}
MANAGE: dict[str, Callable[[str], Any]] = {"address": address, "port": parse_int, "token": str,
                                            "state_file": str, "state_dir": str,
                                            "allowed_hosts": parse_host_names,
                                            "spend_ledger": parse_bool, "spend_top": nonneg(parse_int)}
SIZE: dict[str, Callable[[str], Any]] = {
    "cores": nonneg(parse_int), "ram_mb": nonneg(parse_int), "price": nonneg(parse_float),
    "scratch_mb": nonneg(parse_int), "billing_period": parse_duration,
    "min_charge": parse_duration, "shutdown_window": parse_duration,
    "shutdown_windows": parse_minutes, "instance_type": str,
    "market": choice("on-demand", "spot"), "max_price": nonneg(parse_float),
    "interruptions_per_day": nonneg(parse_float),
    # what the size offers jobs, its own node limits and create options
    "gpus": nonneg(parse_int), "gpu_type": str, "features": parse_names,
    "attributes": parse_attributes, "partitions": parse_names,
    "min_nodes": nonneg(parse_int), "max_nodes": nonneg(parse_int),
    "warm_nodes": nonneg(parse_int), "warm_cores": nonneg(parse_int),
    "warm_schedule": str, "warm_duration": parse_duration, "warm_time_zone": str,
    # what a node of the size really costs: a reservation or savings plan rate, a licence per VM
    "price_override": nonneg(parse_float), "licence_price": nonneg(parse_float),
}
# [Cloud Create] options a [Size NAME] may override (a GPU size needs another image); tag_* too
SIZE_CREATE_OPTIONS = ("image", "user_data", "user_data_file")
HA: dict[str, Callable[[str], Any]] = {
    "backend": choice("etcd"), "endpoints": lambda t: tuple(e.strip() for e in t.split(",") if e.strip()),
    "ca_file": str, "cert_file": str, "key_file": str, "user": str, "password": str,
    "lease_ttl": parse_duration, "stop_margin": parse_duration, "election_key": str, "admin_key": str,
    "deployment": str,
    "timeout": parse_duration,
}
SECTIONS = ("Daemon", "Polling", "Drain", "Cloud", "Cloud Create", "Scheduler", "Manage", "HA")
