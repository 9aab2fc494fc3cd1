"""The deployment's identity on disk: ``<state_dir>/<cluster>.deployment``, made at the first start.

API::

    record, made = establish(settings, config_path)   # read, or create and write (IdentityError)
    identity = process_identity(settings, record, holder)  # core.identity.Identity of this process
    old = renamed_from(settings, config_path)           # records of this config under another name

The record (JSON) holds the deployment id, the cluster name, when the id was made and the config
file that made it. ``[Cloud] deployment_id`` in the configuration wins over the record (with
``[HA]`` it is required: both head nodes must carry the same id). Every VM the deployment boots
carries the id in ``nodemanager-deployment``; a VM with our cluster name and another id is another
deployment's, and one with no id is ours only if it was launched before the id was made (booted
by a version that wrote none).

A record of the same config file under another cluster name is a rename: ``nodemanager run``
refuses to start while VMs of the old name remain (they would be left running, unmanaged), and
otherwise moves the id over to the new name.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable

from nodemanager.cloud import CloudError, is_gone
from nodemanager.core.identity import Identity, sort_by_owner
from nodemanager.cycle.lock import Holder, lock_path
from nodemanager.model import CloudNode
from nodemanager.configuration.settings import Settings
from nodemanager.tags import TAG_DEPLOYMENT

__all__ = ["DeploymentRecord", "IdentityError", "establish", "process_identity", "record_path",
           "renamed_from", "read_record", "forget_record", "start_identity"]

log = logging.getLogger("nodemanager.identity")

_SUFFIX = ".deployment"


class IdentityError(Exception):
    """The deployment record cannot be read or written; ``str()`` names the file."""


@dataclass(frozen=True)
class DeploymentRecord:
    id: str
    cluster: str
    created_at: float       # epoch seconds
    config: str             # the absolute path of the config file that made it

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "cluster": self.cluster, "created_at": self.created_at,
                           "config": self.config}) + "\n"


def record_path(state_dir: str, cluster: str) -> str:
    """``<state_dir>/<cluster>.deployment`` (the cluster name made safe as for the lock)."""
    return lock_path(state_dir, cluster).removesuffix(".lock") + _SUFFIX


def read_record(path: str) -> DeploymentRecord | None:
    """The record in ``path``; None when there is none; IdentityError when it is unusable."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read(65536))
        return DeploymentRecord(id=str(data["id"]), cluster=str(data["cluster"]),
                                created_at=float(data["created_at"]), config=str(data.get("config", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IdentityError(f"{path}: not a deployment record ({exc}); restore it from a backup, or "
                            "set [Cloud] deployment_id to the id your VMs carry "
                            "(tag nodemanager-deployment)") from None


def _write(path: str, record: DeploymentRecord) -> None:
    tmp = f"{path}.tmp"
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            data = record.to_json().encode()
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        raise IdentityError(f"cannot write the deployment record {path}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None


def establish(settings: Settings, config_path: str, *, save: bool = True,
              clock: Callable[[], float] = time.time) -> tuple[DeploymentRecord, bool]:
    """This deployment's record, and whether it was made now (first start, or an id set in the
    config that differs from the record's). ``save``: write what was made (not in a dry run)."""
    path = record_path(settings.manage.state_dir, settings.cloud.cluster)
    configured = settings.cloud.deployment_id
    found = read_record(path)
    if found is not None and (not configured or configured == found.id):
        return found, False
    record = DeploymentRecord(id=configured or f"d-{uuid.uuid4().hex[:16]}", cluster=settings.cloud.cluster,
                              created_at=clock(), config=os.path.abspath(config_path))
    if save:
        _write(path, record)
    return record, True


def renamed_from(settings: Settings, config_path: str) -> list[DeploymentRecord]:
    """Records in the state dir made by this config file under another cluster name."""
    config = os.path.abspath(config_path)
    mine = record_path(settings.manage.state_dir, settings.cloud.cluster)
    out = []
    for path in sorted(glob.glob(os.path.join(glob.escape(settings.manage.state_dir), "*" + _SUFFIX))):
        if path == mine:
            continue
        record = read_record(path)
        if record is not None and record.config == config and record.cluster != settings.cloud.cluster:
            out.append(record)
    return out


def forget_record(settings: Settings, old: DeploymentRecord, config_path: str) -> DeploymentRecord:
    """After a rename with no VM of the old name left: the old id under the new name, written,
    and the old record removed."""
    record = replace(old, cluster=settings.cloud.cluster, config=os.path.abspath(config_path))
    _write(record_path(settings.manage.state_dir, settings.cloud.cluster), record)
    try:
        os.unlink(record_path(settings.manage.state_dir, old.cluster))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise IdentityError(f"cannot remove {record_path(settings.manage.state_dir, old.cluster)}: "
                            f"{exc.strerror or exc}") from None
    return record


def process_identity(settings: Settings, record: DeploymentRecord, holder: Holder | None = None,
                     clock: Callable[[], float] = time.time) -> Identity:
    """This process's :class:`Identity`: ``host:pid:start`` from the instance lock's holder."""
    holder = holder or Holder(os.getpid(), socket.gethostname(), clock())
    return Identity(deployment=record.id, created_at=record.created_at,
                    controller=f"{holder.host}:{holder.pid}:{int(holder.since)}",
                    started_at=holder.since, one_controller=settings.ha is None)


def start_identity(settings: Settings, config_path: str, holder: Holder | None, *, save: bool,
                   list_cluster: Callable[[str], list[CloudNode]]) -> tuple[Settings, Identity]:
    """What ``nodemanager run`` does before it builds the daemon: read or make the deployment
    record (``save``: write what is made), refuse a rename while VMs of the old name remain
    (``list_cluster(name)`` lists a cluster name's VMs), and return the settings with the
    deployment id and this process's :class:`Identity`. IdentityError says why not to start."""
    source = settings.source or config_path
    record: DeploymentRecord | None = None
    for old in renamed_from(settings, config_path):
        try:
            listed = list_cluster(old.cluster)
        except CloudError as exc:
            raise IdentityError(f"{source}: [Cloud] cluster: renamed from {old.cluster!r} to "
                                f"{settings.cloud.cluster!r}; cannot tell whether VMs of {old.cluster!r} "
                                f"remain ({exc}); not starting until the cloud answers") from None
        left = [n for n in sort_by_owner(listed, Identity(old.id, old.created_at, "", 0.0, False)).ours
                if not is_gone(n)]
        if left:
            names = ", ".join(f"{n.name} ({n.id})" for n in left[:10])
            raise IdentityError(
                f"{source}: [Cloud] cluster: renamed from {old.cluster!r} to {settings.cloud.cluster!r} "
                f"while {len(left)} VM(s) of {old.cluster!r} remain ({names}): they would run on, "
                f"unmanaged. Set cluster = {old.cluster} again until they are gone (max_nodes = 0 "
                "gives them back), or destroy them; then rename")
        if save:
            record = forget_record(settings, old, config_path)
            log.warning("cluster renamed from %s to %s: no VM of %s remains; deployment id %s kept",
                        old.cluster, settings.cloud.cluster, old.cluster, old.id)
    made = False
    if record is None:
        record, made = establish(settings, config_path, save=save)
    if made:
        log.info("deployment id %s made for cluster %s (%s); every VM booted carries it in tag %s",
                 record.id, settings.cloud.cluster, record_path(settings.manage.state_dir,
                                                                settings.cloud.cluster), TAG_DEPLOYMENT)
    settings = replace(settings, cloud=replace(settings.cloud, deployment_id=record.id))
    return settings, process_identity(settings, record, holder)
