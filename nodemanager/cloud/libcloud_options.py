"""The libcloud adapter's options: ``[Cloud]`` (the driver constructor's keyword arguments) and
``[Cloud Create]`` (translated per provider by :data:`~nodemanager.cloud.providers.PROVIDER_TABLE`),
checked and converted once, with errors that name the option; and the tags of a libcloud node."""

from __future__ import annotations

import datetime as _dt
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nodemanager.cloud.port import PROVIDERS
from nodemanager.cloud.providers import PROVIDER_TABLE, Provider
from nodemanager.configuration.settings import CloudSettings
from nodemanager.configuration.options import CLOUD_DRIVER_NUMBERS
from nodemanager.configuration.values import parse_bool

__all__ = ["CloudOptions", "parse_options", "check_driver_args", "node_tags", "to_epoch",
           "SECRET_WORDS", "USER_DATA_KWARGS", "USER_DATA_PLACEHOLDERS"]

SECRET_WORDS = re.compile(r"key|secret|password|token|credential|creds", re.IGNORECASE)

_DRIVER_ARG_TYPES: Mapping[str, Callable[[str], Any]] = {**CLOUD_DRIVER_NUMBERS, "secure": parse_bool}
_CONNECTION_KWARGS = frozenset({"timeout", "retry_delay", "backoff", "proxy_url"})

# The create_node keywords that carry a boot script, and the placeholders filled in per node.
USER_DATA_KWARGS = ("ex_userdata", "ex_customdata")
USER_DATA_PLACEHOLDERS = ("@NODE_NAME@", "@SIZE@", "@CLUSTER@")
_USER_DATA_MAX = 16384  # bytes: EC2's limit for user data, the smallest of the clouds'


@dataclass(frozen=True)
class CloudOptions:
    provider: Provider
    driver_kwargs: Mapping[str, Any]
    image: str | None
    location: str | None
    create_kwargs: Mapping[str, Any]


def node_tags(node: Any) -> dict[str, str]:
    """A libcloud node's tags: ``extra['tags']`` (EC2, Azure, dummy) or metadata (GCE, OpenStack)."""
    extra = node.extra or {}
    tags: dict[str, str] = {}
    meta = extra.get("metadata")
    if isinstance(meta, Mapping):
        items = meta.get("items")
        if isinstance(items, list):  # GCE: {"items": [{"key": k, "value": v}], "fingerprint": ...}
            tags.update({str(i.get("key")): str(i.get("value", "")) for i in items if isinstance(i, Mapping)})
        else:
            tags.update({str(k): str(v) for k, v in meta.items() if k != "fingerprint"})
    raw = extra.get("tags")
    if isinstance(raw, Mapping):
        tags.update({str(k): str(v) for k, v in raw.items()})
    return tags


def to_epoch(value: Any) -> float | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return to_epoch(_dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def parse_options(settings: CloudSettings, *, image_needed: bool = True) -> CloudOptions:
    """Check and convert ``[Cloud]`` / ``[Cloud Create]`` options; ValueError names the option.
    ``image_needed`` False: every size brings its own image (checked with each size's options)."""
    name = settings.driver
    if name not in PROVIDERS:
        raise ValueError(f"[Cloud] driver: {name!r} is not a libcloud driver this adapter supports "
                         f"({', '.join(PROVIDERS)})")
    provider = PROVIDER_TABLE[name]
    kwargs: dict[str, Any] = {}
    for option, value in settings.driver_args.items():
        convert = _DRIVER_ARG_TYPES.get(option, str)
        try:
            kwargs[option] = convert(value)
        except ValueError as exc:
            shown = "(hidden)" if SECRET_WORDS.search(option) else repr(value)
            raise ValueError(f"[Cloud] {option}: {shown} is not valid: {exc}") from None
    for option, value in provider.driver_defaults.items():
        kwargs.setdefault(option, value)

    known = provider.create_options
    create: dict[str, Any] = {}
    image = location = None
    for option, value in settings.create_args.items():
        if option == "image":
            image = value
        elif option == "user_data_file" and "user_data" in known:
            create[known["user_data"][0]] = _read_user_data(value)
        elif option == "location":
            location = value
        elif option in known:
            kw, convert = known[option]
            try:
                create[kw] = convert(value)
            except ValueError as exc:
                raise ValueError(f"[Cloud Create] {option}: {value!r} is not valid: {exc}") from None
        else:
            names = ", ".join(sorted(("image", "location", *known,
                                      *(("user_data_file",) if "user_data" in known else ()))))
            raise ValueError(f"[Cloud Create] {option}: not an option for driver {name} "
                             f"(known: {names})")
    provider.check_create(create)
    if provider.image_required and not image and image_needed:
        raise ValueError(f"[Cloud Create] image: required for driver {name}")
    return CloudOptions(provider, kwargs, image, location, create)


def _read_user_data(path: str) -> str:
    """The boot script in ``path`` (``[Cloud Create] user_data_file``); ValueError says why not."""
    import os
    import stat

    where = f"[Cloud Create] user_data_file: {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not hang the start
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{where}: not a regular file")
        data = os.read(fd, _USER_DATA_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > _USER_DATA_MAX:
        raise ValueError(f"{where}: over {_USER_DATA_MAX} bytes, EC2's limit for user data")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None


def check_driver_args(provider: Provider, cls: type, kwargs: Mapping[str, Any]) -> None:
    """libcloud drivers swallow unknown keyword arguments: name them before they are ignored."""
    if provider.driver_options is not None:
        known = set(provider.driver_options)
    else:
        known = set(_CONNECTION_KWARGS | provider.kwargs_options)
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is not None:
                known |= {n for n, p in inspect.signature(init).parameters.items()
                          if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for name in kwargs:
        if name not in known:
            raise ValueError(f"[Cloud] {name}: not an option of libcloud's {provider.name} driver "
                             f"(known: {', '.join(sorted(known))})")
