"""Preflight: everything ``nodemanager run`` needs, checked without changing anything.

``preflight(config_path)`` returns one :class:`Check` per item, in order: the configuration, the
matrix, the state file and state directory, the store (:mod:`.store`), the status port (or, with the daemon of this
configuration running here, its ``/healthz``), the cloud (one listing, then the provider's own
permission check for every mutating call where it has one: EC2's ``DryRun``), the boot scripts
(placeholders left in them), the scheduler (one poll) and its kind's own checks
(:attr:`SchedulerKind.preflight <nodemanager.configuration.kinds.SchedulerKind>`: for SLURM, the running
slurmctld's configuration and node declarations, :mod:`nodemanager.preflight.slurm`). Each failed check
carries the fix an operator should make. Checks that need what an earlier one failed to give are
skipped, not failed twice."""

from __future__ import annotations

import errno
import os
import socket
import time
from typing import Any, Callable, Iterator

from nodemanager.preflight.checklist import Check
from nodemanager.configuration.settings import Settings
from nodemanager.configuration.kinds import hook, in_process, scheduler_kinds

__all__ = ["preflight", "start_checks"]


def preflight(config_path: str, *, clock: Callable[[], float] = time.time) -> list[Check]:
    """Every check, in order; see the module docstring."""
    return list(_checks(config_path, clock))


def start_checks(settings: Settings, cloud: Any, scheduler: Any) -> list[Check]:
    """What ``nodemanager run`` checks once its ports are built, before its actors start: the
    cloud listing and permissions and one scheduler poll (config, matrix, lock and port are
    checked by the start itself)."""
    return [*_cloud(settings, cloud), _scheduler(settings, scheduler)]


def _checks(config_path: str, clock: Callable[[], float]) -> Iterator[Check]:
    import policy_matrix
    from nodemanager.configuration import config

    try:
        settings = config.load(config_path)
    except config.ConfigError as exc:
        yield Check("config", False, "; ".join(str(p) for p in exc.problems),
                    "correct the options named (file:line), see docs/configuration.md")
        return
    sizes = ", ".join(s.name for s in settings.core.sizes) or "none"
    yield Check("config", True, f"{config_path}: cloud {settings.cloud.driver}, scheduler "
                                f"{settings.scheduler.kind}, sizes {sizes}")
    try:
        matrix = (policy_matrix.load(settings.matrix_file) if settings.matrix_file
                  else policy_matrix.load_default())
    except policy_matrix.MatrixError as exc:
        yield Check("matrix", False, "; ".join(str(d) for d in exc.errors),
                    "fix the lines named, then `nodemanager matrix check FILE`")
    else:
        warnings = f", {len(matrix.warnings)} warning(s): `nodemanager matrix check`" if matrix.warnings else ""
        yield Check("matrix", True, f"{matrix.source}: {len(matrix.rules)} rules{warnings}")
    yield from _local_files(settings)
    from nodemanager.preflight.store import store_checks
    yield from store_checks(settings)
    yield _port(settings)
    from nodemanager.daemon import build_ports

    try:
        cloud, scheduler, _ = build_ports(settings, clock)
    except (ValueError, OSError) as exc:
        yield Check("cloud and scheduler", False, str(exc), _cloud_fix(settings, str(exc)))
        return
    yield from _cloud(settings, cloud)
    from nodemanager.preflight.boot import boot_scripts, placeholder_checks

    scripts = boot_scripts(settings)
    yield from placeholder_checks(scripts)
    polled = _scheduler(settings, scheduler)
    yield polled
    kind = scheduler_kinds().get(settings.scheduler.kind)
    if kind is not None and kind.preflight is not None:
        yield from hook(kind.preflight)(settings, bool(polled.ok), scripts)


def _writable_dir(path: str) -> str | None:
    """Why ``path`` cannot hold our files, or None. A missing directory is fine when the daemon
    can create it (its nearest existing parent is writable); nothing is created here."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable by this user"
    return None


def _local_files(settings: Settings) -> Iterator[Check]:
    from nodemanager.console.admin import AdminState, AdminStateError

    state_file = settings.manage.state_file
    state_dir = settings.manage.state_dir
    if state_file:
        try:
            AdminState(path=state_file)
        except AdminStateError as exc:
            yield Check("state file", False, str(exc), "repair or remove the file (it holds holds, "
                        "forced drains and the pause); the daemon will not start without it")
        else:
            folder = os.path.dirname(os.path.abspath(state_file))
            made = os.path.abspath(state_dir) == folder  # the daemon makes its state_dir at start
            problem = _writable_dir(folder)
            if problem is None and not os.path.isdir(folder) and not made:
                problem = f"its directory {folder} does not exist (and nothing creates it)"
            found = "readable" if os.path.exists(state_file) else "not there yet"
            where = ("its directory writable" if os.path.isdir(folder) else
                     f"its directory {folder} does not exist yet (the daemon creates it at start)")
            yield Check("state file", problem is None, f"{state_file}: {problem or f'{found}, {where}'}",
                        f"create {folder} for the daemon's user, or set [Manage] state_file")
    problem = _writable_dir(state_dir)
    exists = ("exists, writable" if os.path.isdir(state_dir) else
              "does not exist; the daemon creates it at start (its parent is writable)")
    yield Check("state dir", problem is None, f"{state_dir}: " + (f"does not exist and cannot be "
                f"created: {problem}" if problem and not os.path.isdir(state_dir) else problem or exists),
                "create it for the daemon's user, or set [Manage] state_dir")
    from nodemanager.store.state_files import set_aside_files
    aside = set_aside_files(state_dir)
    yield Check("state files set aside", None if aside else True,
                ", ".join(aside) if aside else f"none in {state_dir}",
                "the daemon could not read these and started that state empty: look at each, restore "
                "what you can, then remove it" if aside else "")


def _port(settings: Settings) -> Check:
    address, port = settings.manage.address, settings.manage.port
    if port == -1:
        return Check("status port", True, "disabled ([Manage] port = -1)")
    holder = _running_here(settings)
    if holder is not None:  # its own port is taken, by design: ask it how it is
        answer = _healthz(address, port)
        if answer is None:
            return Check("status port", False, f"{address}:{port}: the daemon running here ({holder}) "
                         "does not answer /healthz", "look at its log; restart it if it hangs")
        status, text = answer
        return Check("status port", True if status == 200 else None,
                     f"{address}:{port}: the daemon running here ({holder}) answers /healthz: "
                     f"{status} {text}", "" if status == 200 else "look at its log and status page")
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return Check("status port", False, f"[Manage] address {address!r}: {exc.strerror}",
                     "set [Manage] address to an address of this host")
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(where)
        except OSError as exc:
            busy = exc.errno == errno.EADDRINUSE
            answer = _healthz(address, port) if busy else None
            who = (f" (/healthz answers {answer[0]} there: a nodemanager of another configuration?)"
                   if answer else "")
            return Check("status port", False, f"{address}:{port}: {exc.strerror}{who}",
                         "another process (another nodemanager?) listens there: stop it or set "
                         "[Manage] port" if busy else "set [Manage] address/port to ones this user may bind")
    return Check("status port", True, f"{address}:{port} is free")


def _healthz(address: str, port: int) -> tuple[int, str] | None:
    """The status and first line of ``GET /healthz`` on the status port, or None without an answer."""
    import http.client

    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        reply = conn.getresponse()
        text = reply.read(500).decode("utf-8", "replace").strip()
        return reply.status, text.splitlines()[0] if text else ""
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _cloud(settings: Settings, cloud: Any) -> Iterator[Check]:
    from nodemanager.cloud import CloudError, is_gone

    try:
        nodes = cloud.list_nodes()
    except CloudError as exc:
        yield Check("cloud listing", False, str(exc), _cloud_fix(settings, str(exc)))
        return
    gone = sum(map(is_gone, nodes))
    ended = f" (and {gone} terminated, not counted)" if gone else ""
    yield Check("cloud listing", True, f"{settings.cloud.driver}: {len(nodes) - gone} node(s) of cluster "
                                       f"{settings.cloud.cluster!r}{ended}")
    yield from _owners(settings, nodes)
    check = getattr(cloud, "check_permissions", None)
    if check is None or not settings.core.sizes:
        return
    live = next((n.id for n in nodes if n.state == "running"), None)
    results = check(settings.core.sizes[0], live)
    if not results:
        yield Check("cloud permissions", None, f"{settings.cloud.driver} has no read-only permission "
                    "check; the first boot and destroy will tell", "")
    for r in results:
        fix = (f"grant {r.action} to these credentials (deploy/ec2/iam-policy.json lists every "
               "action the daemon uses)" if r.allowed is False else
               "" if r.allowed else "check the credentials' policy by hand")
        yield Check(f"cloud permission {r.action}", r.allowed, r.detail, fix)
    yield from _dry_run_boots(settings, cloud)


def _dry_run_boots(settings: Settings, cloud: Any) -> Iterator[Check]:
    """Each size booted as the daemon would, with the cloud's own dry run (EC2 ``DryRun``)."""
    boot = getattr(cloud, "dry_run_boot", None)
    if boot is None:
        return
    for size in settings.core.sizes:
        r = boot(size)
        if r is None:
            return
        words = {True: "the cloud would boot it", False: "the cloud refuses it", None: "the cloud gave no verdict"}
        fix = (f"correct what the cloud names in [Cloud Create] or [Size {size.name}] (image, "
               "instance_type, key_name, subnet, security groups, iam_profile) or the credentials' policy"
               if r.allowed is False else "" if r.allowed else "try a boot by hand")
        yield Check(f"cloud dry run: boot {size.name}", r.allowed, f"{words[r.allowed]}: {r.detail}", fix)


def _running_here(settings: Settings) -> Any:
    """The lock holder of this cluster's daemon if it runs on this host (its pid is alive), else None."""
    from nodemanager.cycle.lock import Holder, lock_path
    try:
        with open(lock_path(settings.manage.state_dir, settings.cloud.cluster), encoding="utf-8") as f:
            holder = Holder.parse(f.read(4096))
        if holder is None or holder.host != socket.gethostname():
            return None
        os.kill(holder.pid, 0)
    except (OSError, ValueError):
        return None
    return holder


def _owners(settings: Settings, nodes: list[Any]) -> Iterator[Check]:
    """Whose the listed VMs are: ours, another deployment's, and whether another controller of
    this deployment acts beside the daemon running here."""
    from nodemanager.cloud import is_gone
    from nodemanager.core.identity import Identity, another_controller, sort_by_owner
    from nodemanager.cycle.deployment import IdentityError, read_record, record_path
    from nodemanager.tags import TAG_DEPLOYMENT

    if in_process(settings.cloud.driver):
        return
    path = record_path(settings.manage.state_dir, settings.cloud.cluster)
    try:
        record = read_record(path)
    except IdentityError as exc:
        yield Check("deployment", False, str(exc), "restore the file, or set [Cloud] deployment_id")
        return
    deployment = settings.cloud.deployment_id or (record.id if record else "")
    created = record.created_at if record is not None and record.id == deployment else time.time()
    holder = _running_here(settings)
    me = Identity(deployment, created, f"{holder.host}:{holder.pid}:{int(holder.since)}" if holder else "",
                  holder.since if holder else 0.0, one_controller=holder is not None and settings.ha is None)
    owned = sort_by_owner([n for n in nodes if not is_gone(n)], me)
    adopted = f" ({len(owned.adopted)} without a deployment tag, launched before the id: adopted)" if owned.adopted else ""
    if deployment:
        yield Check("deployment", True, f"id {deployment}: {len(owned.ours)} VM(s) of cluster "
                                        f"{settings.cloud.cluster!r} are ours{adopted}")
    else:
        yield Check("deployment", True, f"no id yet: the first start makes one in {path}{adopted}")
    if owned.foreign:
        shown = ", ".join(f"{n.name} ({n.id}, deployment {n.tags.get(TAG_DEPLOYMENT) or 'none'})"
                          for n in owned.foreign[:10])
        yield Check("other deployments", None, f"{len(owned.foreign)} VM(s) with cluster name "
                    f"{settings.cloud.cluster!r} belong to another deployment: {shown}; never touched",
                    "give one of the two pools another [Cloud] cluster; if they are this pool's (a lost "
                    "state_dir), set [Cloud] deployment_id to the id they carry")
    stop = another_controller(settings.cloud.cluster, owned.others)
    if stop is not None:
        yield Check("other controllers", False, stop, "stop the other nodemanager of this deployment (or "
                    "run both under [HA]), then restart the one here")
    elif holder is not None and settings.ha is None:
        yield Check("other controllers", True, f"none acting beside the daemon here ({holder})")


def _cloud_fix(settings: Settings, message: str) -> str:
    if "credential" in message.lower() or "auth" in message.lower():
        return "check [Cloud] key/secret (or the driver's credential options)"
    return f"check [Cloud] driver = {settings.cloud.driver} and its options, and that the API answers"


def _scheduler(settings: Settings, scheduler: Any) -> Check:
    from nodemanager.scheduler import SchedulerError

    try:
        poll = scheduler.poll()
    except SchedulerError as exc:
        return Check("scheduler", False, f"{settings.scheduler.kind}: {exc}",
                     "check [Scheduler] options and that this host can query the scheduler "
                     "(docs/slurm.md, docs/htcondor.md)")
    return Check("scheduler", True, f"{settings.scheduler.kind}: {len(poll.workers)} worker(s), "
                                    f"{len(poll.demand)} demand item(s)")
