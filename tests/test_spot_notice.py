"""deploy/spot/spot-notice, the in-VM relay of a spot reclaim notice, against a local
HTTP server answering as each cloud's metadata service documents; its STARTD_CRON output is
what the HTCondor adapter classifies as ``reclaimed``."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import classad2
import pytest

from nodemanager.scheduler.htcondor_classify import classify_htcondor

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "deploy" / "spot" / "spot-notice"


class Metadata(BaseHTTPRequestHandler):
    """EC2 IMDSv2, GCE and Azure metadata paths; ``replies`` maps a path to (status, body)."""

    replies: dict[str, tuple[int, str]] = {}
    seen: list[tuple[str, str, dict[str, str]]] = []

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, dict(self.headers)))
        status, body = self.replies.get(self.path, (404, "not found"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metadata() -> Iterator[type[Metadata]]:
    Metadata.replies, Metadata.seen = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Metadata.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield Metadata
    server.shutdown()
    server.server_close()


def cron(metadata: type[Metadata], cloud: str) -> classad2.ClassAd:
    env = {**os.environ, "NODEMANAGER_METADATA_URL": metadata.url}  # type: ignore[attr-defined]
    done = subprocess.run([sys.executable, str(SCRIPT), "htcondor", "--cloud", cloud],
                          capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "- update:true"
    return classad2.parseOne("\n".join(done.stdout.splitlines()[:-1]))


def test_ec2_notice_becomes_the_startd_attribute_and_a_reclaimed_startd(metadata):
    ad = cron(metadata, "ec2")
    assert ad.eval("ReclaimNoticeDeadline") is classad2.Value.Undefined  # 404: no notice
    metadata.replies = {"/latest/api/token": (200, "tok-1"),
                        "/latest/meta-data/spot/instance-action":
                            (200, json.dumps({"action": "terminate", "time": "2026-11-24T01:02:03Z"}))}
    ad = cron(metadata, "ec2")
    assert ad["ReclaimNoticeDeadline"] == 1795482123
    put, get = metadata.seen[-2:]
    assert put[0] == "PUT" and {k.lower(): v for k, v in get[2].items()}["x-aws-ec2-metadata-token"] == "tok-1"
    slot = {"State": "Unclaimed", "Activity": "Idle", "NumDynamicSlots": 1,
            "ReclaimNoticeDeadline": ad["ReclaimNoticeDeadline"]}
    c = classify_htcondor(slot)
    assert c.state == "reclaimed" and "2026-11-24 01:02:03 UTC" in c.why


def test_gce_and_azure_notices(metadata):
    metadata.replies = {"/computeMetadata/v1/instance/preempted": (200, "FALSE")}
    assert cron(metadata, "gce").eval("ReclaimNoticeDeadline") is classad2.Value.Undefined
    metadata.replies = {"/computeMetadata/v1/instance/preempted": (200, "TRUE")}
    assert cron(metadata, "gce")["ReclaimNoticeDeadline"] > 1_700_000_000
    assert {k.lower(): v for k, v in metadata.seen[-1][2].items()}["metadata-flavor"] == "Google"
    events = {"DocumentIncarnation": 2, "Events": [
        {"EventId": "e1", "EventType": "Freeze", "NotBefore": "Tue, 24 Nov 2026 01:00:00 GMT"},
        {"EventId": "e2", "EventType": "Preempt", "NotBefore": "Tue, 24 Nov 2026 01:02:03 GMT"}]}
    metadata.replies = {"/metadata/scheduledevents?api-version=2020-07-01": (200, json.dumps(events))}
    assert cron(metadata, "azure")["ReclaimNoticeDeadline"] == 1795482123
    assert {k.lower(): v for k, v in metadata.seen[-1][2].items()}["metadata"] == "true"


def test_without_a_metadata_service_the_cron_says_nothing_and_an_answering_error_is_reported(metadata):
    """A VM with no metadata service (not a cloud, or not reachable) publishes no notice and
    writes nothing a startd would log every few seconds; a service that answers badly is named."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"   # nothing listens once closed
    for cloud in ("ec2", "gce", "azure"):
        done = subprocess.run([sys.executable, str(SCRIPT), "htcondor", "--cloud", cloud], capture_output=True,
                              text=True, timeout=30, env={**os.environ, "NODEMANAGER_METADATA_URL": closed})
        assert (done.returncode, done.stderr) == (0, ""), cloud
        assert done.stdout.splitlines() == ["ReclaimNoticeDeadline = undefined", "- update:true"]
    metadata.replies = {"/computeMetadata/v1/instance/preempted": (500, "broken")}
    done = subprocess.run([sys.executable, str(SCRIPT), "htcondor", "--cloud", "gce"], capture_output=True,
                          text=True, timeout=30, env={**os.environ, "NODEMANAGER_METADATA_URL": metadata.url})
    assert done.returncode == 0 and "gce metadata: HTTP Error 500" in done.stderr
