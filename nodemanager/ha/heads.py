"""Heads that would decide differently are reported: each head publishes a digest of what it
decides with (one short hash per option of its configuration, and its matrix's) under
``<prefix>/heads/<me>`` in etcd, on a lease of its own (a head that stops vanishes within a TTL),
and compares every other head's with its own.

    heads = HeadDigests(client, "/nodemanager/<deployment_id>/heads/", me, ttl, describe, leads)
    heads.step()            # one round: keep our entry alive (and current), read the others
    heads.differences()     # ("head2:77 decides with another max_nodes, matrix", ...)
    heads.other_leaders()   # ("head2:77 leads under election key /x/leader", ...)

The entries also say under which election key a head leads: the prefix follows the deployment
id, so a head elected under another key (another ``election_key`` set by hand) is seen by all.

:func:`config_parts` and :func:`compare` are pure.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import fields
from typing import Any, Callable, Mapping

from nodemanager.configuration.settings import Settings
from nodemanager.ha.etcd import EtcdClient, EtcdError

__all__ = ["HeadDigests", "config_parts", "compare"]

log = logging.getLogger("nodemanager.ha")


def _short(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def config_parts(settings: Settings, matrix_sha256: str) -> dict[str, str]:
    """A short hash per decision option (``[Daemon]`` and sizes by name, ``drain.*`` for
    ``[Drain]``), the cluster, the deployment id and the matrix: what two heads must share."""
    parts = {f.name: _short(getattr(settings.core, f.name)) for f in fields(settings.core)}
    parts.update({f"drain.{f.name}": _short(getattr(settings.drain, f.name)) for f in fields(settings.drain)})
    parts.update(cluster=_short(settings.cloud.cluster), deployment_id=_short(settings.cloud.deployment_id),
                 matrix=matrix_sha256[:12])
    return parts


def compare(mine: Mapping[str, str], others: Mapping[str, Mapping[str, str]]) -> tuple[str, ...]:
    """One line per other head whose parts differ from ``mine``, naming the options."""
    out = []
    for head, theirs in sorted(others.items()):
        names = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            out.append(f"{head} decides with another {shown}")
    return tuple(out)


class HeadDigests:
    """This head's entry under ``prefix`` and what the other heads' say (see the module docstring)."""

    def __init__(self, client: EtcdClient, prefix: str, me: str, ttl: float,
                 describe: Callable[[], Mapping[str, str]], leads: Callable[[], str] = str) -> None:
        self.client, self.prefix, self.me, self.ttl, self.describe = client, prefix, me, ttl, describe
        self.leads = leads    # the election key this head leads under now ("": it does not lead)
        self._leaders: tuple[str, ...] = ()
        self._lease: int | None = None
        self._published: str | None = None
        self._lock = threading.Lock()
        self._differences: tuple[str, ...] = ()
        self._heads: tuple[str, ...] = ()

    def step(self) -> None:
        """Keep our entry alive and current, then compare with the others'; etcd errors leave
        the last comparison in place (the lease rounds report etcd's state)."""
        mine = dict(self.describe())
        key = self.leads()
        value = json.dumps({"head": self.me, "config": mine, "leads": key}, sort_keys=True)
        try:
            if self._lease is None or self.client.keepalive(self._lease) <= 0:
                self._lease, self._published = self.client.grant(self.ttl), None
            if value != self._published:
                self.client.put(self.prefix + self.me, value, lease=self._lease)
                self._published = value
            others, leaders = {}, []
            for kv in self.client.get_prefix(self.prefix):
                entry = _entry(kv.value)
                if entry is not None and entry[0] != self.me:
                    others[entry[0]] = entry[1]
                    if entry[2] and key and entry[2] != key:
                        leaders.append(f"{entry[0]} leads too, under the election key {entry[2]}")
        except EtcdError:
            return
        differences = compare(mine, others)
        with self._lock:
            before, self._differences, self._heads = self._differences, differences, tuple(sorted(others))
            self._leaders = tuple(sorted(leaders))
        if differences != before:
            for line in differences:
                log.warning("HA: %s than this head (%s): a takeover changes what is decided", line, self.me)
            if before and not differences:
                log.info("HA: every head decides with the same configuration and matrix again")

    def differences(self) -> tuple[str, ...]:
        """One line per other live head that decides with other options or another matrix."""
        with self._lock:
            return self._differences

    def other_leaders(self) -> tuple[str, ...]:
        """Other heads of this deployment that lead under another election key while this one
        leads (two elections: a second leader)."""
        with self._lock:
            return self._leaders

    def heads(self) -> tuple[str, ...]:
        """The other live heads."""
        with self._lock:
            return self._heads

    def stop(self) -> None:
        if self._lease is not None:
            try:
                self.client.revoke(self._lease)
            except EtcdError:
                pass   # it expires by itself within the TTL
            self._lease = None


def _entry(text: str) -> tuple[str, dict[str, str], str] | None:
    try:
        doc: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("head"), str) or not isinstance(doc.get("config"), dict):
        return None
    return doc["head"], {str(k): str(v) for k, v in doc["config"].items()}, str(doc.get("leads") or "")
