"""How the libcloud adapter builds a create request: each size's options (``[Cloud Create]`` with
the size's own image, boot script and tags over it) and libcloud's ``create_node`` arguments
(market, boot-script placeholders, tags, size and location objects, the provider's own objects and
the idempotency token). The same request serves a real create and EC2's dry run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from libcloud.compute.base import NodeLocation, NodeSize

from nodemanager.cloud.libcloud_options import USER_DATA_KWARGS, CloudOptions, parse_options
from nodemanager.cloud.markets import market_create_kwargs
from nodemanager.configuration.settings import CloudSettings
from nodemanager.core.identity import client_token
from nodemanager.model import Size, frozen_map
from nodemanager.tags import TAG_DEPLOYMENT

__all__ = ["CreateRequests"]


class CreateRequests:
    """The create requests of one cloud: ``options`` are its ``[Cloud Create]`` options parsed,
    ``wall_clock`` dates the idempotency token's window."""

    def __init__(self, settings: CloudSettings, options: CloudOptions, wall_clock: Callable[[], float]) -> None:
        self._settings = settings
        self._options = options
        self._provider = options.provider
        self._wall_clock = wall_clock
        self._size_options: dict[tuple[tuple[str, str], ...], tuple[CloudOptions, dict[str, str]]] = {}

    def options_for(self, size: Size) -> tuple[CloudOptions, dict[str, str]]:
        """The create options and extra tags of ``size``: ``[Cloud Create]`` with the size's own
        ``image``/``user_data``/``user_data_file``/``tag_*`` over it; ValueError names the size."""
        if not size.create_args:
            return self._options, {}
        found = self._size_options.get(size.create_args)
        if found is None:
            own = {k: v for k, v in size.create_args if not k.startswith("tag_")}
            if "user_data" in own or "user_data_file" in own:  # the size's script replaces both
                base = {k: v for k, v in self._settings.create_args.items()
                        if k not in ("user_data", "user_data_file")}
            else:
                base = dict(self._settings.create_args)
            try:
                opts = parse_options(replace(self._settings, create_args=frozen_map({**base, **own})))
            except ValueError as exc:
                raise ValueError(f"[Size {size.name}] {str(exc).removeprefix('[Cloud Create] ')}") from None
            found = (opts, {k[4:]: v for k, v in size.create_args if k.startswith("tag_")})
            self._size_options[size.create_args] = found
        return found

    def create_kwargs(self, driver: Any, size: Size, name: str, tags: Mapping[str, str],
                      request: str, opts: CloudOptions) -> dict[str, Any]:
        """libcloud's ``create_node`` arguments for one VM of ``size`` named ``name`` (``driver`` the libcloud
        driver its objects belong to)."""
        d = driver
        if self._provider.in_process:
            return {"name": name, "size": None, "image": None}
        kwargs: dict[str, Any] = dict(opts.create_kwargs)
        kwargs.update(market_create_kwargs(self._provider.name, size))
        kwargs["name"] = name
        for kw in USER_DATA_KWARGS:
            if kw in kwargs:  # the VM learns the name it must join the scheduler as
                kwargs[kw] = (kwargs[kw].replace("@NODE_NAME@", name).replace("@SIZE@", size.name)
                              .replace("@CLUSTER@", self._settings.cluster))
        if self._provider.tags_kwarg:
            kwargs[self._provider.tags_kwarg] = dict(tags)
        kwargs["size"] = NodeSize(id=size.cloud_type, name=size.cloud_type, ram=size.ram_mb, disk=0,
                                  bandwidth=None, price=size.price, driver=d)
        if opts.location:
            kwargs["location"] = NodeLocation(id=opts.location, name=opts.location, country=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; its drivers pass None
        # the provider's own objects: image, zone, subnet, security groups...
        deployment = tags.get(TAG_DEPLOYMENT)
        # EC2's idempotency token: one per deployment, name and time window, so a second controller
        # of the deployment booting the same name gets the first one's VM, not a second VM
        token = client_token(deployment, name, self._wall_clock()) if deployment else request
        self._provider.build_create(d, kwargs, opts.image, opts.location, token)
        return kwargs
