"""Admin requests on an HA pair while etcd is frozen: two real daemon processes
(``python -m nodemanager run``, each on the embedded simulated world) and one real etcd that the
test freezes with SIGSTOP. A request is answered 200 only once etcd has it, so the next leader,
after a kill -9 of the one that answered and after a second, longer freeze, holds every request
answered 200; a request answered 503 was never in force on the head that refused it.

Short leases (8 s TTL) and bounded polls keep the test under a minute."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest
import requests

from tests.fixtures.head import DaemonProcess
from tests.fixtures.moto import free_port

REPO = pathlib.Path(__file__).resolve().parents[1]
TOKEN = "ha-stall-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TTL, MARGIN = 8, 2


class Head(DaemonProcess):
    """One head node: a daemon process with its own config, state_dir and status port."""

    def __init__(self, name: str, root: pathlib.Path, etcd_url: str) -> None:
        self.name = name
        self.port = free_port()
        self.dir = root / name
        self.dir.mkdir()
        self.log = self.dir / "daemon.log"
        self.config = self.dir / "nodemanager.ini"
        text = (REPO / "config.example.ini").read_text()
        text = (text.replace("port = 8989", f"port = {self.port}").replace("\ntoken =\n", f"\ntoken = {TOKEN}\n")
                .replace("\nstate_dir =\n", f"\nstate_dir = {self.dir / 'state'}\n")
                .replace("\n# deployment_id =\n", "\ndeployment_id = ha-stall-test\n"))
        for what in ("cloud", "scheduler", "cycle"):
            text = text.replace(f"{what}_interval = 5s", f"{what}_interval = 0.5s")
        self.config.write_text(text + f"\n[HA]\nendpoints = {etcd_url}\nlease_ttl = {TTL}s\n"
                                      f"stop_margin = {MARGIN}s\ntimeout = 0.5s\n")
        self.config.chmod(0o600)
        DaemonProcess.__init__(self, self.config, self.log)

    def started(self) -> "Head":
        self.start()
        return self

    def status(self) -> dict[str, Any]:
        if self.proc is None:
            return {}
        try:
            return dict(requests.get(f"http://127.0.0.1:{self.port}/status.json", timeout=3).json())
        except (requests.RequestException, ValueError):
            return {}

    def leads(self) -> bool:
        return str(self.status().get("ha") or "").startswith("leader")

    def post(self, path: str, **kw: Any) -> requests.Response:
        return requests.post(f"http://127.0.0.1:{self.port}{path}", headers=AUTH, timeout=60, **kw)


def wait(predicate: Callable[[], Any], timeout: float, what: str, heads: list[Head]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    logs = "\n".join(f"--- {h.name}\n{h.log.read_text()[-3000:]}" for h in heads)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{logs}")


@contextmanager
def frozen(etcd) -> Iterator[None]:
    """etcd stopped dead (SIGSTOP): connections open, nothing answered, until the block ends."""
    os.kill(etcd.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(etcd.proc.pid, signal.SIGCONT)


def during_freeze(etcd, seconds: float, calls: dict[str, Callable[[], requests.Response]]) -> dict[str, requests.Response]:
    """Send ``calls`` at once while etcd is frozen for ``seconds``; their answers."""
    answers: dict[str, requests.Response] = {}
    with frozen(etcd):
        threads = [threading.Thread(target=lambda k=k, c=c: answers.__setitem__(k, c())) for k, c in calls.items()]
        for t in threads:
            t.start()
        time.sleep(seconds)
    for t in threads:
        t.join(60)
    return answers


def admin_of(head: Head) -> dict[str, Any]:
    return dict(head.status().get("admin") or {})


def obeys(answers: dict[str, requests.Response], node_a: str, node_c: str) -> Callable[[dict[str, Any]], bool]:
    """Whether an admin state holds every request answered 200."""
    def check(admin: dict[str, Any]) -> bool:
        if not admin:
            return False
        ok = {k for k, r in answers.items() if r.status_code == 200}
        return (("hold" not in ok or node_a in admin["held"])
                and ("pause" not in ok or admin["paused"] == "kernel upgrade")
                and ("cancel" not in ok or node_c not in admin["forced_drains"]))
    return check


@pytest.fixture
def heads(etcd, tmp_path) -> Iterator[list[Head]]:
    made = [Head("head1", tmp_path, etcd.url).started(), Head("head2", tmp_path, etcd.url).started()]
    try:
        yield made
    finally:
        for h in made:
            h.stop()


def test_admin_requests_during_an_etcd_freeze_are_refused_or_kept_by_the_next_leader(etcd, heads) -> None:
    leader = wait(lambda: next((h for h in heads if h.leads()), None), 30, "a leader", heads)
    standby = next(h for h in heads if h is not leader)
    node_a, node_c = wait(lambda: [n["node_id"] for n in leader.status().get("nodes", ())][:2] if len(leader.status().get("nodes", ())) >= 2 else None, 30,
                          "two nodes on the leader", heads)
    assert leader.post(f"/admin/drain/{node_c}").status_code == 200      # etcd answers: saved
    # the standby's page shows the admin state the leader holds
    wait(lambda: node_c in admin_of(standby).get("forced_drains", ()), 10, "the standby showing the drain", heads)

    answers = during_freeze(etcd, 2.5, {
        "hold": lambda: leader.post(f"/admin/hold/{node_a}"),
        "pause": lambda: leader.post("/admin/pause", json={"reason": "kernel upgrade"}),
        "cancel": lambda: leader.post(f"/admin/cancel/{node_c}")})
    codes = {k: r.status_code for k, r in answers.items()}
    assert set(codes.values()) <= {200, 409, 503}, {k: r.text for k, r in answers.items()}
    assert all("NOT SAVED" not in r.text for r in answers.values())
    assert codes["hold"] == 200, answers["hold"].text     # a 2.5 s freeze is well within the lease:
    # the answer only waits for etcd
    # what was refused was never in force on the head that refused it
    mine = admin_of(leader)
    assert obeys(answers, node_a, node_c)(mine)
    assert codes["pause"] == 200 or mine["paused"] is None
    assert codes["hold"] == 200 or node_a not in mine["held"]

    leader.kill()                                                         # kill -9
    wait(standby.leads, 3 * TTL, "the standby taking over", heads)
    wait(lambda: obeys(answers, node_a, node_c)(admin_of(standby)), 15,
         f"the new leader holding every request answered 200 ({codes})", heads)
    leader.start()                                                        # back, as a standby

    # a second freeze, longer than the lease: the leader stops; whoever leads next holds the same
    late = during_freeze(etcd, TTL + 2, {"resume": lambda: standby.post("/admin/resume")})
    assert late["resume"].status_code in (200, 409, 503), late["resume"].text
    now = wait(lambda: next((h for h in heads if h.leads()), None), 4 * TTL, "a leader after the freeze", heads)
    resumed = late["resume"].status_code == 200
    kept = {k: r for k, r in answers.items() if not (resumed and k == "pause")}
    wait(lambda: obeys(kept, node_a, node_c)(admin_of(now)), 15, "the leader after the freeze holding them", heads)
    if resumed:
        wait(lambda: admin_of(now).get("paused", "") is None, 15, "the resume answered 200 kept", heads)
    print(f"\nanswers during a 2.5 s freeze: {codes}; during a {TTL + 2} s freeze: resume "
          f"{late['resume'].status_code} ({json.loads(late['resume'].text).get('error', 'saved')})")


class LateEtcd:
    """The real etcd client, except that the next ``put_if`` is applied by etcd and then reported
    as timed out, as when etcd was frozen and answered after the client gave up."""

    def __init__(self, client) -> None:
        self.client, self.late = client, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def put_if(self, key: str, value: str, mod_revision: int) -> tuple[bool, int]:
        out = self.client.put_if(key, value, mod_revision)
        if self.late:
            self.late -= 1
            from nodemanager.ha.etcd import EtcdError
            raise EtcdError(f"etcd {key}: Read timed out. (read timeout=0.5)")
        return out


def test_a_write_whose_answer_is_lost_is_read_back_and_a_refused_one_etcd_applied_late_is_undone(etcd) -> None:
    from nodemanager.console.admin import AdminNotSaved, AdminState
    from nodemanager.ha.admin_store import EtcdAdminStore
    from nodemanager.ha.etcd import EtcdClient

    client = LateEtcd(EtcdClient((etcd.url,), timeout=1.0))
    store = EtcdAdminStore(client, "/nodemanager/late/admin", lambda: True, lambda: "me", window=0.0)
    admin = AdminState(store=store)
    assert admin.hold("i-1").changed                      # saved
    client.late = 1                                       # the write lands, its answer is lost
    with pytest.raises(AdminNotSaved, match="pause not saved, so not applied"):
        admin.pause("kernel upgrade")
    assert admin.paused is None                           # not in force here...
    assert '"kernel upgrade"' in client.client.get(store.key).value   # ...though etcd has it
    assert store.in_doubt()
    admin.reload()                                        # what the leader does before it acts
    assert store.in_doubt() is None and admin.paused is None and admin.held == {"i-1"}
    assert '"paused": null' in client.client.get(store.key).value     # undone in etcd too
    assert admin.pause("kernel upgrade").changed and admin.paused == "kernel upgrade"
    client.late, store.window = 1, 5.0                    # the answer is lost, the key read back:
    assert admin.hold("i-2").changed and admin.held == {"i-1", "i-2"}   # it landed, so it is saved
    assert store.in_doubt() is None and '"i-2"' in client.client.get(store.key).value
