"""Load the INI configuration into :class:`nodemanager.configuration.settings.Settings`.

Every problem is reported before anything starts, all at once, each naming the file, line,
section and option (``config.ini:12: [Daemon] idle_grace: expected a duration like 300, 5m or 1h``).
Durations accept plain seconds or an ``s``/``m``/``h``/``d`` suffix. See ``config.example.ini`` for
every option with its meaning and default.
"""

from __future__ import annotations

import configparser
import os
import re
import stat
from dataclasses import fields, replace
from typing import Any, Callable

from nodemanager.configuration.kinds import cloud_kind, in_process, scheduler_kinds
from nodemanager.configuration.values import parse_bool, parse_duration
from nodemanager.model import Size, frozen_map
from nodemanager.tags import settings_digest
from nodemanager.configuration.warm import warm_schedule
from nodemanager.configuration.settings import (CoreSettings, DrainSettings, HASettings, LogSettings,
                                  ManageSettings, PollSettings, SchedulerSettings, Settings, StoreSettings)
from nodemanager.configuration.options import (DAEMON as _DAEMON,
                                               DAEMON_SHELL as _DAEMON_SHELL, DRAIN as _DRAIN,
                                               HA as _HA, MANAGE as _MANAGE, MAX_BYTES, POLL as _POLL,
                                               PROFILE_DIR, PROFILES,
                                               SECRET_OPTIONS, SECTIONS as _SECTIONS,
                                               SIZE as _SIZE,
                                               SIZE_CREATE_OPTIONS, STORE as _STORE)
from nodemanager.configuration.budget_sections import budget_sections
from nodemanager.configuration.cloud_reader import check_identity, check_markets, check_real_cloud, cloud_settings
from nodemanager.configuration.cloud_sections import named_clouds
from nodemanager.core.pricing import effective_price
from nodemanager.configuration.reader import ConfigError, Problem
from nodemanager.configuration.reader import Reader as _Reader
from nodemanager.configuration.reader import suggest as _suggest

__all__ = ["ConfigError", "Problem", "load", "loads", "parse_duration", "credential_warnings",
           "default_state_dir", "MAX_BYTES",
           "SECRET_OPTIONS", "SIZE_CREATE_OPTIONS", "with_overrides", "parse_bool"]


def loads(text: str, source: str = "<config>", *, base_dir: str | None = None,
          require_sizes: bool = False, resolve: bool = False, profile: str | None = None) -> Settings:
    """Settings from INI ``text``; raises :class:`ConfigError` listing every problem.

    ``require_sizes``: the daemon's config must define a ``[Size NAME]`` even for the simulated
    cloud (``plan`` and ``simulate`` may take sizes from elsewhere); a real cloud always must.
    ``resolve``: look ``[Manage] address`` up (at start only: a reload must not fail on DNS).
    ``profile``: a shipped profile applied under the file's own options, as ``[Daemon] profile``
    would (which it overrides).
    """
    cp = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False)
    cp.optionxform = str.lower  # type: ignore[assignment,method-assign]
    try:
        cp.read_string(text, source=source)
    except configparser.MissingSectionHeaderError as exc:
        raise ConfigError([Problem(source, exc.lineno, "-", None,
                                   "an option before any [section] header")]) from None
    except configparser.ParsingError as exc:
        # the line itself is not quoted: a stray line is often a pasted secret
        raise ConfigError([Problem(source, n, "-", None, "neither 'option = value' nor a [section] "
                                   "header") for n, _line in exc.errors]) from None
    except configparser.Error as exc:
        message = str(exc).splitlines()[0].split(": ", 1)[-1]
        raise ConfigError([Problem(source, getattr(exc, "lineno", None),
                                   getattr(exc, "section", "") or "-", None, message)]) from None
    r = _Reader(cp, source, text)
    profile_matrix = _apply_profile(r, profile)

    for section in cp.sections():
        if section not in _SECTIONS and not section.startswith(("Size ", "Budget ", "Cloud ")):
            r.problem(section, None, "unknown section" + _suggest(section, _SECTIONS + (
                "Size NAME", "Budget NAME", "Cloud NAME")))

    daemon_schema: dict[str, Callable[[str], Any]] = {k: v[1] for k, v in _DAEMON.items()}
    daemon_schema.update(_DAEMON_SHELL)
    daemon = r.typed("Daemon", daemon_schema)
    core_kwargs = {_DAEMON[k][0]: v for k, v in daemon.items() if k in _DAEMON}

    sizes: list[Size] = []
    for section in cp.sections():
        if not section.startswith("Size "):
            continue
        name = section[5:].strip()
        values = r.typed(section, {**_SIZE, **dict.fromkeys(SIZE_CREATE_OPTIONS, str)},
                         open_ended=True)
        values = _size_create(r, section, values, base_dir)
        override, licence = values.pop("price_override", None), values.pop("licence_price", 0.0)
        if override is not None or licence:
            listed = values.get("price", 0.0)
            values.update(list_price=listed, price=effective_price(listed, override, licence))
        missing = [o for o in ("cores", "ram_mb") if o not in values]
        for o in missing:
            r.problem(section, None, f"missing required option {o}")
        if not missing:
            if values.get("cores", 0) <= 0:
                r.problem(section, "cores", "must be at least 1")
            if 0 < values.get("max_nodes", 0) < values.get("min_nodes", 0):
                r.problem(section, "max_nodes", f"is below min_nodes ({values['min_nodes']})")
            warm_schedule(r.problem, section, values)
            sizes.append(Size(name=name, **values))
    core = CoreSettings(sizes=tuple(sizes), disruption_budgets=budget_sections(r), **core_kwargs)
    if core.max_nodes < core.min_nodes:
        r.problem("Daemon", "max_nodes", f"is below min_nodes ({core.min_nodes})")

    poll = PollSettings(**r.typed("Polling", _POLL))
    drain_values = r.typed("Drain", _DRAIN)
    for option in ("escalate_quick", "escalate_fast"):
        expr = drain_values.get(option, "").strip()
        if expr:
            error = _expression_error(expr)
            if error:
                r.problem("Drain", option, error)
    if "reclaim_foreign_after" in drain_values:
        core = replace(core, reclaim_foreign_after=drain_values.pop("reclaim_foreign_after"))
    drain = DrainSettings(**drain_values)
    manage = ManageSettings(**r.typed("Manage", _MANAGE))
    state_file = manage.state_file.strip()
    if state_file and base_dir and not os.path.isabs(state_file):
        state_file = os.path.join(base_dir, state_file)
    state_dir = manage.state_dir.strip() or default_state_dir()
    if base_dir and not os.path.isabs(state_dir):
        state_dir = os.path.join(base_dir, state_dir)
    manage = replace(manage, state_file=state_file, state_dir=state_dir)
    if resolve and manage.port >= 0:
        _check_resolves(r, manage.address)

    cloud = cloud_settings(r)
    user_data_file = cloud.create_args.get("user_data_file", "").strip()
    if user_data_file and base_dir and not os.path.isabs(user_data_file):
        cloud = replace(cloud, create_args=frozen_map(
            {**cloud.create_args, "user_data_file": os.path.join(base_dir, user_data_file)}))
    clouds, sizes = named_clouds(r, cloud, sizes, cloud_settings)
    if cloud.max_nodes:
        r.problem("Cloud", "max_nodes", "is a [Cloud NAME]'s own cap; the pool's is [Daemon] max_nodes")
    core = replace(core, sizes=tuple(sizes),
                   cloud_max_nodes=tuple((c.name, c.max_nodes) for c in clouds if c.max_nodes))
    scheduler = _scheduler(r)
    core = replace(core, size_digests=tuple((s.name, settings_digest(s, cloud.create_args))
                                            for s in sizes))
    kind = cloud_kind(cloud.driver)
    if (kind is None or kind.build is not None or clouds) and not sizes:   # not the simulated world's
        r.problem("Cloud", "driver", "a real cloud needs at least one [Size NAME] section")
    elif require_sizes and not sizes:
        r.problem("Cloud", "driver", "the simulated cloud needs at least one [Size NAME] section "
                  "too: without one nothing is ever booted")

    for named in clouds or (cloud,):
        check_markets(r, named.driver, [s for s in sizes if s.cloud == named.name])
    if any(cloud_kind(c.driver) is not None and not in_process(c.driver) for c in (cloud, *clouds)):
        check_real_cloud(r)
    ha = _ha(r)
    store = StoreSettings(**r.typed("Store", _STORE))
    if store.url and not store.url.startswith(("postgresql://", "postgres://")):
        r.problem("Store", "url", "must be empty (SQLite in state_dir) or a postgresql:// URL")
    if not 1000 <= store.buffer <= 10_000_000:
        r.problem("Store", "buffer", f"must be 1000 to 10000000 records, got {store.buffer}")
    for option in ("keep_ledger", "keep_events", "keep_gone"):
        if getattr(store, option) > 100 * 365 * 86400:
            r.problem("Store", option, "must be at most 100 years (0: for ever)")
    check_identity(r, cloud, ha is not None)
    for named in clouds:
        check_identity(r, replace(named, deployment_id=""), False)

    matrix = daemon.get("matrix", "").strip()
    if profile_matrix is not None and matrix == profile_matrix:
        matrix = os.path.join(os.path.dirname(policy_matrix_path()), matrix)
    elif matrix and base_dir and not os.path.isabs(matrix):
        matrix = os.path.join(base_dir, matrix)
    if matrix and not os.path.exists(matrix):
        r.problem("Daemon", "matrix", f"no such file {matrix}")
    if r.problems:
        raise ConfigError(r.problems)
    return Settings(core=core, drain=drain, cloud=cloud, clouds=clouds, scheduler=scheduler, poll=poll,
                    manage=manage, ha=ha, store=store, matrix_file=matrix, dry_run=daemon.get("dry_run", False),
                    log_level=daemon.get("log_level", "info").upper(), source=source,
                    log=LogSettings(format=daemon.get("log_format", "text"),
                                    file=_beside(daemon.get("log_file", "").strip(), base_dir),
                                    file_max_mb=daemon.get("log_file_max_mb", 50),
                                    file_keep=daemon.get("log_file_keep", 5)))


def _beside(path: str, base_dir: str | None) -> str:
    """A path of the configuration: a relative one is beside the file (empty stays empty)."""
    return os.path.join(base_dir, path) if path and base_dir and not os.path.isabs(path) else path


def _size_create(r: _Reader, section: str, values: dict[str, Any],
                 base_dir: str | None) -> dict[str, Any]:
    """``values`` with the size's create options (image, user data, ``tag_*``) moved into
    ``create_args``; an option neither known nor a tag is a problem at its line."""
    create: list[tuple[str, str]] = []
    for option, raw in r.cp.items(section, raw=True):
        if option.startswith("tag_") and len(option) > 4:
            create.append((option, raw))
        elif option in SIZE_CREATE_OPTIONS:
            value = raw.strip()
            if option == "user_data_file" and value and base_dir and not os.path.isabs(value):
                value = os.path.join(base_dir, value)
            create.append((option, value))
            values.pop(option, None)
        elif option not in _SIZE:
            r.problem(section, option, "unknown option"
                      + _suggest(option, (*_SIZE, *SIZE_CREATE_OPTIONS, "tag_NAME")))
    if create:
        values["create_args"] = tuple(create)
    return values
def policy_matrix_path() -> str:
    """The shipped default matrix (profiles name their matrices beside it)."""
    from policy_matrix import default_path
    return default_path()


def _apply_profile(r: _Reader, name: str | None) -> str | None:
    """Fill options the file leaves unset from the shipped profile ``name`` (else the file's
    ``[Daemon] profile``); return the profile's ``matrix`` when the file does not set its own."""
    cp = r.cp
    given = cp.get("Daemon", "profile", fallback=None, raw=True) if cp.has_section("Daemon") else None
    name = name or (given.strip().lower() if given else None)
    if not name or name not in PROFILES:
        return None  # an unknown name is reported with the other [Daemon] options
    shipped = configparser.ConfigParser(interpolation=None, strict=True)
    shipped.optionxform = str.lower  # type: ignore[assignment,method-assign]
    path = os.path.join(PROFILE_DIR, f"{name}.ini")
    with open(path, encoding="utf-8") as f:
        shipped.read_file(f, source=path)
    site_matrix = cp.get("Daemon", "matrix", fallback=None, raw=True) if cp.has_section("Daemon") else None
    for section in shipped.sections():
        if not cp.has_section(section):
            cp.add_section(section)
        for option, value in shipped.items(section, raw=True):
            if not cp.has_option(section, option):
                cp.set(section, option, value)
    return None if site_matrix is not None else shipped.get("Daemon", "matrix", fallback=None)


def _ha(r: _Reader) -> HASettings | None:
    """``[HA]``; None without the section. Keys left empty are set when the daemon starts
    (:func:`nodemanager.ha.wiring.election_keys`)."""
    if not r.cp.has_section("HA"):
        return None
    ha = HASettings(**r.typed("HA", _HA))
    if not ha.endpoints:
        r.problem("HA", "endpoints", "needs at least one etcd URL (http://host:2379)")
    for e in ha.endpoints:
        if not e.startswith(("http://", "https://")):
            r.problem("HA", "endpoints", f"{e!r} is not an http:// or https:// URL")
    if ha.lease_ttl < 1 or ha.lease_ttl != int(ha.lease_ttl):
        r.problem("HA", "lease_ttl", "must be whole seconds, at least 1s (etcd leases count in seconds)")
    if not 0 < ha.stop_margin < ha.lease_ttl:
        r.problem("HA", "stop_margin", f"must be above 0 and below lease_ttl ({ha.lease_ttl:g}s)")
    if bool(ha.cert_file) != bool(ha.key_file):
        r.problem("HA", "cert_file" if ha.cert_file else "key_file", "cert_file and key_file go together")
    if not re.fullmatch(r"[A-Za-z0-9_.-]*", ha.deployment):
        r.problem("HA", "deployment", f"{ha.deployment!r}: use letters, digits, '.', '_' and '-' only")
    return ha


def default_state_dir() -> str:
    """Where this process keeps its lock and local records when ``[Manage] state_dir`` is empty.

    Root (a system service): ``/var/lib/nodemanager``, the systemd unit's StateDirectory; anyone
    else: ``$XDG_STATE_HOME/nodemanager`` (``~/.local/state/nodemanager``), so the demo needs no root.
    Under systemd, ``$STATE_DIRECTORY`` (set by the unit's StateDirectory=) comes first.
    """
    if os.environ.get("STATE_DIRECTORY"):
        return os.environ["STATE_DIRECTORY"].split(":")[0]
    if os.geteuid() == 0:
        return "/var/lib/nodemanager"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "nodemanager")


def _expression_error(expr: str) -> str | None:
    """Why an escalation expression is unusable, or None."""
    try:
        from nodemanager.core import validate_expression
        validate_expression(expr)
    except ImportError:
        return "needs the HTCondor bindings (classad2): pip install htcondor"
    except ValueError as exc:
        return str(exc)
    return None


def _check_resolves(r: _Reader, address: str) -> None:
    """A ``[Manage] address`` host name that does not resolve, at its line."""
    import socket
    if not address:
        return
    try:
        socket.getaddrinfo(address, None)
    except (OSError, UnicodeError) as exc:
        r.problem("Manage", "address", f"cannot resolve {address!r}: {getattr(exc, 'strerror', None) or exc}")


def _scheduler(r: _Reader) -> SchedulerSettings:
    if not r.cp.has_section("Scheduler"):
        return SchedulerSettings()
    items = dict(r.cp.items("Scheduler", raw=True))
    kind = items.pop("type", "simulated").strip().lower()
    kinds = scheduler_kinds()
    if kind not in kinds:
        r.problem("Scheduler", "type", "expected one of " + ", ".join(kinds) + f", got {kind!r}")
        return SchedulerSettings()
    allowed = kinds[kind].options
    for option in items:
        if option not in allowed:
            r.problem("Scheduler", option, f"unknown option for type {kind}" + _suggest(option, allowed))
    r.typed("Scheduler", kinds[kind].numbers, open_ended=True)
    return SchedulerSettings(kind=kind, options=frozen_map(items))


def credential_warnings(path: str, settings: Settings) -> list[str]:
    """Warnings for a config file that holds secrets and is readable by group or others."""
    secrets = sorted({k for c in (settings.cloud, *settings.clouds) for k in c.driver_args if k in SECRET_OPTIONS})
    if settings.manage.token:
        secrets.append("token")
    if not secrets:
        return []
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return []
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return [f"{path} holds credentials ({', '.join(sorted(secrets))}) and is readable by "
                f"others (mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}"]
    return []


def load(path: str, *, require_sizes: bool = False, resolve: bool = False,
         profile: str | None = None) -> Settings:
    """Settings from the INI file at ``path`` (relative paths inside resolve against its folder)."""
    from policy_matrix.files import FileRefused, read_capped

    try:
        text = read_capped(path, MAX_BYTES, what="a config file").decode("utf-8-sig")
    except FileRefused as exc:
        message = "file not found" if exc.kind == "not found" else str(exc)
        raise ConfigError([Problem(path, None, "-", None, message)]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([Problem(path, None, "-", None, f"cannot read: {exc}")]) from None
    return loads(text, path, base_dir=os.path.dirname(os.path.abspath(path)),
                 require_sizes=require_sizes, resolve=resolve, profile=profile)


def with_overrides(settings: Settings, **core: Any) -> Settings:
    """A copy of ``settings`` with some CoreSettings fields replaced (for sweeps and tests)."""
    known = {f.name for f in fields(CoreSettings)}
    bad = set(core) - known
    if bad:
        raise ValueError("unknown core setting(s): " + ", ".join(sorted(bad)))
    return replace(settings, core=replace(settings.core, **core))
