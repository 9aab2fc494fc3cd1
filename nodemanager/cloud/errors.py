"""Classify what a libcloud call raised into a :class:`~nodemanager.cloud.port.CloudError`.

The controller decides what to do from the kind alone:

- ``quota``: the account limit is reached (EC2 ``InstanceLimitExceeded``, ``VcpuLimitExceeded``,
  GCE ``QUOTA_EXCEEDED``, Azure ``QuotaExceeded``, OpenStack nova's 403 "Quota exceeded ...";
  otherwise a 4xx error whose code, or whose text when it has no code, matches
  ``exceed|quota|limit``: the rule Arvados node manager used);
- ``capacity``: the provider has no room for this size now (``InsufficientInstanceCapacity``...,
  and for spot sizes ``MaxSpotInstanceCountExceeded`` and ``SpotMaxPriceTooLow``: the size is held
  off for ``quota_backoff`` and the plan falls back to the next cheapest size, see docs);
- ``rate_limit``: throttled (HTTP 429, ``RequestLimitExceeded``, libcloud's ``RateLimitReachedError``);
  ``retry_after`` carries the reply's ``Retry-After`` header in seconds when there is one;
- ``transient``: timeouts, connection errors, HTTP 5xx, unparseable replies;
- ``not_found``: the node does not exist (``InvalidInstanceID.NotFound``, HTTP 404);
- ``permanent``: authentication, bad parameters, anything else.

Messages never carry credentials: pass the secret values to scrub as ``secrets``.
"""

from __future__ import annotations

import math
import re
import socket
import ssl
from typing import Iterable, Mapping

from nodemanager.cloud.port import CloudError, ErrorKind

__all__ = ["classify", "error_codes", "retry_after_seconds", "scrub", "QUOTA_CODES",
           "CAPACITY_CODES", "RATE_LIMIT_CODES", "NOT_FOUND_CODES", "TRANSIENT_CODES"]

QUOTA_CODES = frozenset({
    "InstanceLimitExceeded", "VcpuLimitExceeded",
    "InsufficientAddressCapacity", "InsufficientFreeAddressesInSubnet",
    "InsufficientVolumeCapacity", "AddressLimitExceeded", "VolumeLimitExceeded",
    "QUOTA_EXCEEDED", "QuotaExceeded", "OperationNotAllowed",
})
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity",
    "InsufficientReservedInstanceCapacity", "Unsupported",
    "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest",
    # spot capacity: a limit of the spot market, not of the account, so on-demand may still boot
    "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow",
})
RATE_LIMIT_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequests",
    "RequestThrottled", "SlowDown", "rateLimitExceeded", "userRateLimitExceeded",
})
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "ResourceNotFound", "NotFound"})
TRANSIENT_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
                             "RequestTimeout", "RequestExpired"})

_QUOTA_WORDS = re.compile(r"exceed|quota|limit", re.IGNORECASE)
_QUOTA_EXCEEDED = re.compile(r"quota exceeded", re.IGNORECASE)
# libcloud's EC2 driver reports errors as "Code: message" lines.
_CODE_LINE = re.compile(r"^\s*([A-Za-z][\w.]*):\s", re.MULTILINE)
_TIMEOUT_WORDS = re.compile(r"timed? ?out|did not complete", re.IGNORECASE)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for value in secrets:
        if value:
            text = text.replace(value, "***")
    return text


def error_codes(message: str) -> tuple[str, ...]:
    """The provider error codes named in a libcloud error message (EC2: ``Code: message`` lines)."""
    return tuple(_CODE_LINE.findall(message))


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The ``Retry-After`` header in seconds (libcloud already turned an HTTP date into seconds)."""
    if not headers:
        return None
    raw = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if 0 < seconds < math.inf else None  # 'INFINITY' parses too: not a delay


def _kind_of_codes(codes: tuple[str, ...]) -> ErrorKind | None:
    for kind, known in ((ErrorKind.RATE_LIMIT, RATE_LIMIT_CODES), (ErrorKind.CAPACITY, CAPACITY_CODES),
                        (ErrorKind.QUOTA, QUOTA_CODES), (ErrorKind.NOT_FOUND, NOT_FOUND_CODES),
                        (ErrorKind.TRANSIENT, TRANSIENT_CODES)):
        if any(code in known for code in codes):
            return kind
    return None


def _kind_of_http(status: int, message: str, extra_codes: tuple[str, ...] = ()) -> ErrorKind:
    codes = error_codes(message) + extra_codes
    by_code = _kind_of_codes(codes)
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if by_code is not None:
        return by_code
    if status >= 500:
        return ErrorKind.TRANSIENT
    if status in (401, 403):
        # nova answers an exhausted quota with 403 "Quota exceeded for instances: ..."
        return ErrorKind.QUOTA if not codes and _QUOTA_EXCEEDED.search(message) else ErrorKind.PERMANENT
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status == 408:
        return ErrorKind.TRANSIENT
    # With a provider code, judge the code (not free text that may mention a "limit" parameter).
    if _QUOTA_WORDS.search(" ".join(codes) if codes else message):
        return ErrorKind.QUOTA
    return ErrorKind.PERMANENT


def classify(exc: BaseException, call: str, secrets: Iterable[str] = ()) -> CloudError:
    """The :class:`CloudError` for ``exc`` raised by the cloud call named ``call``."""
    if isinstance(exc, CloudError):
        return exc
    from libcloud.common.exceptions import BaseHTTPError, RateLimitReachedError
    from libcloud.common.google import ResourceNotFoundError
    from libcloud.common.types import (InvalidCredsError, LibcloudError, MalformedResponseError,
                                       ProviderError)
    from requests import exceptions as rexc

    secrets = tuple(secrets)
    message = scrub(str(exc) or type(exc).__name__, secrets)
    retry_after: float | None = None
    if isinstance(exc, RateLimitReachedError):
        kind = ErrorKind.RATE_LIMIT
        retry_after = exc.retry_after or None
    elif isinstance(exc, BaseHTTPError):
        kind = _kind_of_http(int(exc.code), message)
        retry_after = retry_after_seconds(exc.headers)
        message = f"HTTP {exc.code} {message}".rstrip()
    elif isinstance(exc, InvalidCredsError):
        kind = ErrorKind.PERMANENT
    elif isinstance(exc, ResourceNotFoundError):  # GCE: a 404, or a name no zone knows
        kind = ErrorKind.NOT_FOUND
    elif isinstance(exc, ProviderError):
        code = getattr(exc, "code", None)  # GCE errors carry the API's reason code
        kind = _kind_of_http(int(exc.http_code or 0), message, (code,) if isinstance(code, str) else ())
    elif isinstance(exc, MalformedResponseError):
        kind = ErrorKind.TRANSIENT
        message = scrub(f"malformed reply: {exc.value}", secrets)
    elif isinstance(exc, (rexc.Timeout, rexc.ConnectionError, socket.timeout, TimeoutError,
                          ConnectionError, ssl.SSLError)):
        kind = ErrorKind.TRANSIENT
    elif isinstance(exc, OSError):
        kind = ErrorKind.TRANSIENT
    elif isinstance(exc, LibcloudError):
        by_code = _kind_of_codes(error_codes(message))
        if by_code is not None:
            kind = by_code
        elif _TIMEOUT_WORDS.search(message):
            kind = ErrorKind.TRANSIENT
        elif _QUOTA_WORDS.search(message):
            kind = ErrorKind.QUOTA
        else:
            kind = ErrorKind.PERMANENT
    else:
        kind = ErrorKind.PERMANENT
        message = f"{type(exc).__name__}: {message}"
    return CloudError(kind, message, retry_after=retry_after, call=call)
