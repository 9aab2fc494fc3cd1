"""Several clouds behind one port: one :class:`CloudDriver` per ``[Cloud NAME]``, listed in parallel.

Each node a cloud lists comes back with ``cloud`` set to that cloud's name and ``id`` as
``NAME:<the cloud's id>`` (two clouds' ids never collide: a node is keyed by cloud and id);
creates go to the size's cloud, destroys and tag writes to the node's, with the cloud's own id.

A cloud that does not answer keeps its last good listing in the merged one, with the time of
that listing in :attr:`Listing.polled`, so the core freezes that cloud's nodes and sizes only
(``Snapshot.cloud_polled``) while the other clouds go on. Only when no cloud answers does the
listing fail as a whole.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Mapping

from nodemanager.cloud.port import CloudDriver, CloudError, ErrorKind
from nodemanager.model import CloudNode, Size, provider_id

__all__ = ["SeveralClouds", "Listing"]

log = logging.getLogger("nodemanager.cloud")


class Listing(list[CloudNode]):
    """A merged listing; ``polled`` maps each cloud's name to the time of its listing in it
    (absent: that cloud never answered since the start)."""

    polled: Mapping[str, float]


def _named(name: str, node: CloudNode) -> CloudNode:
    return replace(node, id=f"{name}:{node.id}", cloud=name)


class SeveralClouds:
    """The port over ``clouds`` (name -> its own driver, in config order); ``clock`` stamps each
    cloud's listing on the daemon's clock."""

    def __init__(self, clouds: Mapping[str, CloudDriver], *, clock: Callable[[], float]) -> None:
        self.clouds = dict(clouds)
        self.name = "cloud"
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, list[CloudNode]]] = {}   # name -> (time, its nodes)
        self._errors: dict[str, str] = {}                            # name -> its last listing error
        self._pool = ThreadPoolExecutor(max_workers=len(self.clouds), thread_name_prefix="cloud-list")

    def __repr__(self) -> str:
        return f"SeveralClouds({', '.join(f'{n}={c!r}' for n, c in self.clouds.items())})"

    def _cloud(self, name: str, what: str) -> CloudDriver:
        cloud = self.clouds.get(name)
        if cloud is None:
            raise CloudError(ErrorKind.PERMANENT, f"{what} names no configured cloud ({name or 'none'})")
        return cloud

    def _list_one(self, name: str) -> list[CloudNode]:
        return [_named(name, n) for n in self.clouds[name].list_nodes()]

    def list_nodes(self) -> Listing:
        """Every cloud's nodes; a cloud that fails contributes its last good listing (with its
        time); raises the first error only when every cloud failed."""
        futures = {name: (self._clock(), self._pool.submit(self._list_one, name)) for name in self.clouds}
        errors: list[CloudError] = []
        for name, (started, future) in futures.items():
            try:
                nodes = future.result()
            except CloudError as exc:
                errors.append(exc)
                with self._lock:
                    if self._errors.get(name) != str(exc):
                        log.warning("cloud %s: listing failed: %s; its nodes are frozen at its last "
                                    "good listing until it answers", name, exc)
                    self._errors[name] = str(exc)
                continue
            with self._lock:
                if self._errors.pop(name, None) is not None:
                    log.info("cloud %s: listing answers again", name)
                self._last[name] = (started, nodes)
        if len(errors) == len(self.clouds):
            raise errors[0]
        out = Listing()
        with self._lock:
            for name in self.clouds:
                if name in self._last:
                    out.extend(self._last[name][1])
            out.polled = {name: at for name, (at, _) in self._last.items()}
        return out

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        return _named(size.cloud, self._cloud(size.cloud, f"size {size.name}").create_node(size, name, tags))

    def destroy_node(self, node: CloudNode) -> None:
        self._cloud(node.cloud, f"node {node.name}").destroy_node(replace(node, id=provider_id(node), cloud=""))

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        self._cloud(node.cloud, f"node {node.name}").set_tags(replace(node, id=provider_id(node), cloud=""), tags)

    @property
    def clock_skew(self) -> float | None:
        """The skew farthest from ours among the clouds that measured one."""
        skews = [s for s in (getattr(c, "clock_skew", None) for c in self.clouds.values()) if s is not None]
        return max(skews, key=abs) if skews else None

    @property
    def send_gate(self) -> Callable[[str], None] | None:
        return next((getattr(c, "send_gate", None) for c in self.clouds.values()), None)

    @send_gate.setter
    def send_gate(self, gate: Callable[[str], None] | None) -> None:
        for cloud in self.clouds.values():
            if hasattr(cloud, "send_gate"):
                setattr(cloud, "send_gate", gate)

    def dry_run_boot(self, size: Size) -> Any:
        return getattr(self._cloud(size.cloud, f"size {size.name}"), "dry_run_boot", lambda s: None)(size)

    def check_permissions(self, size: Size, node_id: str | None = None) -> Any:
        check = getattr(self._cloud(size.cloud, f"size {size.name}"), "check_permissions", None)
        if node_id is not None and node_id.startswith(f"{size.cloud}:"):
            node_id = node_id[len(size.cloud) + 1:]
        return check(size, node_id) if check is not None else []
