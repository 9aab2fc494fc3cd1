"""The cloud API actions the adapter calls, and a check that the credentials may call them.

``EC2_ACTIONS`` is the one list of EC2 actions the libcloud adapter sends: the shipped policy
(``deploy/ec2/iam-policy.json``) grants exactly these, and a test records what the adapter really
sends and compares. :func:`ec2_dry_run` asks EC2 itself, with ``DryRun=true``: EC2 answers
``DryRunOperation`` (HTTP 412) when the call would have been allowed and ``UnauthorizedOperation``
(HTTP 403) when the policy refuses it, and changes nothing either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from nodemanager.cloud.errors import error_codes, scrub
from nodemanager.cloud.port import TAG_CLUSTER, TAG_DRAIN

__all__ = ["EC2_ACTIONS", "Permission", "ec2_dry_run", "dry_run_verdict"]

EC2_ACTIONS: Mapping[str, str] = {
    "DescribeInstances": "list the cluster's nodes every cloud poll",
    "RunInstances": "boot nodes",
    "CreateTags": "tag nodes at boot (TagSpecification) and mark drains and destroys",
    "DeleteTags": "clear a drain marker when a drain is cancelled",
    "TerminateInstances": "destroy nodes",
}


@dataclass(frozen=True)
class Permission:
    """What the cloud said of one action: ``allowed`` True, False (refused) or None (no answer)."""

    action: str
    allowed: bool | None
    detail: str


def ec2_dry_run_calls(image: str, instance_type: str, subnet: str | None, node_id: str | None,
                      cluster: str) -> tuple[tuple[str, dict[str, str]], ...]:
    """The EC2 calls the adapter makes, as ``DryRun`` requests: boot ``instance_type`` from
    ``image`` (in ``subnet``), tag, untag and terminate ``node_id`` (a made-up id when None)."""
    boot = {"ImageId": image, "InstanceType": instance_type, "MinCount": "1", "MaxCount": "1"}
    if subnet:
        boot["SubnetId"] = subnet
    target = {"ResourceId.1": node_id or "i-00000000000000000"}
    return (("RunInstances", boot),
            ("CreateTags", {**target, "Tag.1.Key": TAG_CLUSTER, "Tag.1.Value": cluster}),
            ("DeleteTags", {**target, "Tag.1.Key": TAG_DRAIN}),
            ("TerminateInstances", {"InstanceId.1": target["ResourceId.1"]}))


def ec2_dry_run(connection: Any, action: str, params: Mapping[str, str],
                secrets: tuple[str, ...] = ()) -> Permission:
    """Send ``action`` with ``DryRun=true`` on a libcloud EC2 connection and read the verdict."""
    name = f"ec2:{action}"
    try:
        connection.request("/", params={"Action": action, "DryRun": "true", **params})
    except Exception as exc:  # EC2 always answers a dry run with an error: the verdict is in it
        return dry_run_verdict(name, exc, secrets)
    return Permission(name, None, "no verdict: EC2 carried out a dry run without an answer")


def dry_run_verdict(name: str, exc: BaseException, secrets: tuple[str, ...] = (), *,
                    whole_call: bool = False) -> Permission:
    """What EC2's answer ``exc`` to a ``DryRun`` request says. ``whole_call``: the request was the
    real one (every parameter a boot sends), so any other client error (a wrong image id, key
    pair or profile) is EC2 refusing it too, not only a missing right."""
    text = scrub(str(exc), secrets)
    codes = error_codes(text)
    status = getattr(exc, "code", None)
    if "DryRunOperation" in codes or status == 412:
        return Permission(name, True, "allowed (EC2 answered DryRunOperation)")
    if "UnauthorizedOperation" in codes or status == 403 or "UnauthorizedOperation" in text:
        return Permission(name, False, f"refused: {text or 'HTTP 403'}")
    if whole_call and codes and not any(c.startswith(("RequestLimitExceeded", "InternalError", "Unavailable",
                                                      "ServiceUnavailable")) for c in codes):
        return Permission(name, False, f"refused: {text}")
    return Permission(name, None, f"no verdict: {text or type(exc).__name__}")
