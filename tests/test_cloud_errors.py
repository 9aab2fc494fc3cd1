"""Classification of what libcloud raises into CloudError kinds, the token bucket, and the
reconcile helpers. Exceptions are built the way libcloud builds them (``exception_from_message``
and its exception classes); the real HTTP path is covered in test_cloud_ec2.py."""

from __future__ import annotations

import socket
import time
from email.utils import formatdate

import pytest
import requests
from libcloud.common.exceptions import exception_from_message
from libcloud.common.google import QuotaExceededError, ResourceNotFoundError
from libcloud.common.types import InvalidCredsError, LibcloudError, MalformedResponseError

from nodemanager.cloud import TAG_REQUEST, CloudError, ErrorKind, TokenBucket
from nodemanager.cloud.errors import classify, error_codes
from nodemanager.cloud.reconcile import reconcile_create, reconcile_destroy
from nodemanager.model import CloudNode


def http(status: int, message: str, **headers: str) -> Exception:
    return exception_from_message(code=status, message=message,
                                  headers={k.replace("_", "-"): v for k, v in headers.items()})


@pytest.mark.parametrize("exc, kind", [
    (http(400, "InstanceLimitExceeded: Your quota allows for 0 more running instance(s)."), ErrorKind.QUOTA),
    (http(400, "VcpuLimitExceeded: You have requested more vCPU capacity than allowed."), ErrorKind.QUOTA),
    (http(400, "SomethingLimitExceeded: account cap reached for this type"), ErrorKind.QUOTA),
    (http(400, "Your account has exceeded its instance quota"), ErrorKind.QUOTA),
    (http(400, "InvalidParameterValue: Value (0) for parameter limit is invalid"), ErrorKind.PERMANENT),
    (http(500, "InsufficientInstanceCapacity: We currently do not have sufficient capacity."),
     ErrorKind.CAPACITY),
    # spot capacity is per market: the size is held off, no account quota is learned
    (http(400, "MaxSpotInstanceCountExceeded: Max spot instance count exceeded"), ErrorKind.CAPACITY),
    (http(400, "SpotMaxPriceTooLow: Your Spot request price of 0.001 is lower than the minimum"),
     ErrorKind.CAPACITY),
    (http(503, "RequestLimitExceeded: Request limit exceeded."), ErrorKind.RATE_LIMIT),
    (http(429, "slow down"), ErrorKind.RATE_LIMIT),
    (http(500, "InternalError: An internal error has occurred"), ErrorKind.TRANSIENT),
    (http(502, "<html>Bad Gateway</html>"), ErrorKind.TRANSIENT),
    (http(400, "InvalidInstanceID.NotFound: The instance ID 'i-1' does not exist"), ErrorKind.NOT_FOUND),
    (http(400, "InvalidParameterValue: Value (t9.huge) for parameter instanceType is invalid."),
     ErrorKind.PERMANENT),
    (http(403, "UnauthorizedOperation: You are not authorized to perform this operation."),
     ErrorKind.PERMANENT),
    (InvalidCredsError("AuthFailure: AWS was not able to validate the provided access credentials"),
     ErrorKind.PERMANENT),
    (QuotaExceededError("Quota 'CPUS' exceeded.", 403, "QUOTA_EXCEEDED"), ErrorKind.QUOTA),
    (ResourceNotFoundError("The resource 'x' was not found", 404, "notFound"), ErrorKind.NOT_FOUND),
    (requests.exceptions.ConnectTimeout("connect timed out"), ErrorKind.TRANSIENT),
    (requests.exceptions.ConnectionError("connection refused"), ErrorKind.TRANSIENT),
    (socket.timeout("timed out"), ErrorKind.TRANSIENT),
    (ConnectionResetError(104, "Connection reset by peer"), ErrorKind.TRANSIENT),
    (MalformedResponseError("Failed to parse XML", body="<html>"), ErrorKind.TRANSIENT),
    (LibcloudError("Job did not complete in 200 seconds"), ErrorKind.TRANSIENT),
    (LibcloudError("Invalid availability zone: us-east-1z"), ErrorKind.PERMANENT),
    (LibcloudError("Operation timed out"), ErrorKind.TRANSIENT),
    (ValueError("You can only supply ex_security_group_ids combined with ex_subnet"), ErrorKind.PERMANENT),
])
def test_kinds(exc, kind):
    err = classify(exc, "create_node")
    assert err.kind is kind, str(err)
    assert err.call == "create_node"


def test_retry_after_seconds_and_http_date():
    assert classify(http(503, "RequestLimitExceeded: x", retry_after="12"), "list").retry_after == 12.0
    assert classify(http(429, "", retry_after="30"), "list").retry_after == 30.0
    later = classify(http(503, "RequestLimitExceeded: x", retry_after=formatdate(
        time.time() + 120, usegmt=True)), "list").retry_after
    assert later is not None and 100 <= later <= 120
    assert classify(http(503, "RequestLimitExceeded: x"), "list").retry_after is None
    for nonsense in ("INFINITY", "nan", "-5", "soon"):       # not a delay: the usual backoff applies
        assert classify(http(503, "RequestLimitExceeded: x", retry_after=nonsense), "list").retry_after is None


def test_message_keeps_the_code_and_hides_secrets():
    err = classify(http(401, "AuthFailure: key AKIDXYZ1234 secret hunter22 rejected"), "list_nodes",
                   secrets=("AKIDXYZ1234", "hunter22"))
    assert "AuthFailure" in str(err) and "HTTP 401" in str(err)
    assert "AKIDXYZ1234" not in str(err) and "hunter22" not in str(err)
    assert str(err).startswith("list_nodes: permanent: ")


def test_cloud_error_passes_through_and_codes_are_found():
    original = CloudError(ErrorKind.CAPACITY, "x")
    assert classify(original, "c") is original
    assert error_codes("InstanceLimitExceeded: a\nInternalError: b") == ("InstanceLimitExceeded",
                                                                          "InternalError")


def test_token_bucket_spaces_calls():
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    bucket = TokenBucket(10.0, burst=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(7):
        bucket.acquire()
    assert waits == pytest.approx([0.1] * 4)
    assert now[0] == pytest.approx(0.4)  # 7 calls: a burst of 3, then one per 0.1 s
    now[0] += 0.25  # 2.5 tokens come back
    waits.clear()
    for _ in range(3):
        bucket.acquire()
    assert waits == pytest.approx([0.05])
    unlimited = TokenBucket(0, clock=lambda: 0.0, sleep=sleep)
    assert [unlimited.acquire() for _ in range(100)] == [0.0] * 100


def _node(id: str, state: str = "running", request: str | None = None, name: str = "n") -> CloudNode:
    tags = {TAG_REQUEST: request} if request else {}
    return CloudNode(id=id, name=name, size="small", launched_at=0.0, state=state, tags=tags)


def test_reconcile_create_and_destroy():
    listing = [_node("i-1", request="r1"), _node("i-2", state="terminated", request="r2"),
               _node("i-3", name="legacy-3")]
    assert reconcile_create(listing, "r1").id == "i-1"
    assert reconcile_create(listing, "r2") is None  # made, but already terminated
    assert reconcile_create(listing, "r9") is None
    assert reconcile_create(listing, "r9", name="legacy-3").id == "i-3"
    assert not reconcile_destroy(listing, "i-1")
    assert reconcile_destroy(listing, "i-2")  # terminated
    assert reconcile_destroy(listing, "i-404")  # gone from the listing
    assert reconcile_destroy([_node("i-5", state="shutting-down")], "i-5")
