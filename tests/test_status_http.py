"""The status server's HTTP manners: idle and slow clients, backlog, Host check, body limits,
quiet disconnects, throttled warnings, bind before serve. Real sockets on loopback; time is the
injected clock (the server checks its connections once a second of real time)."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import subprocess
import threading
from typing import Iterator

import pytest
import requests

from nodemanager.configuration.config import ConfigError, load
from nodemanager.console.http_server import (CROWDED_IDLE, IDLE_TIMEOUT, REQUEST_TIMEOUT, BindError,
                                      HttpServer, host_allowed)
from nodemanager.configuration.settings import ManageSettings
from nodemanager.console.status import StatusServer
from nodemanager.console.status_document import StatusView
from tests.fixtures.observability import Clock, sample_report

TOKEN = "s3cret-token"  # the status_server fixture's


def _connect(server: StatusServer | HttpServer) -> socket.socket:
    return socket.create_connection(server.address, timeout=10)


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server closed the connection (waits up to the socket's timeout)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _server_has_read(server: StatusServer) -> None:
    """Return once the server has read what every connection sent so far: its one I/O thread
    reads every readable socket before it answers a request that came later."""
    requests.get(server.url + "/healthz", timeout=5)


def _raw(server: StatusServer | HttpServer, request: bytes) -> bytes:
    """Send ``request`` as is and read the reply until the server closes or 10 s pass."""
    with _connect(server) as sock:
        sock.sendall(request)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


@contextlib.contextmanager
def _on_log(logger: str, text: str) -> Iterator[threading.Event]:
    """An event set when ``logger`` logs a line containing ``text`` (at any level)."""
    event = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                event.set()

    log, watch = logging.getLogger(logger), Watch(logging.DEBUG)
    level = log.level
    log.addHandler(watch)
    log.setLevel(logging.DEBUG)
    try:
        yield event
    finally:
        log.removeHandler(watch)
        log.setLevel(level)


def _refused(server: StatusServer, reason: str) -> float:
    text = requests.get(server.url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(f'nodemanager_http_refused_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_idle_connections_hold_no_thread_and_are_closed(status_server, clock: Clock) -> None:
    before = threading.active_count()
    idle = [_connect(status_server) for _ in range(200)]
    try:
        # served at once although 200 connections sit idle (accepted before this one)
        assert requests.get(status_server.url + "/status.json", timeout=5).status_code == 200
        assert threading.active_count() - before <= 2
        clock.now += IDLE_TIMEOUT + 1
        assert all(_closed_by_server(s) for s in idle)
    finally:
        for s in idle:
            s.close()


def test_a_full_server_closes_its_quiet_connections_for_new_clients() -> None:
    clock = Clock()

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    server = HttpServer(app, "127.0.0.1", 0, clock=clock, connection_limit=20)
    server.serve()
    host, port = server.address
    quiet = [_connect(server) for _ in range(19)]
    # accepted in order: once this is answered, the 19 are open on the server
    assert _raw(server, b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").endswith(b"ok")
    last = _connect(server)  # the 20th: the server is full
    try:
        clock.now += 2 * CROWDED_IDLE  # quiet, but far from the idle timeout
        assert requests.get(f"http://{host}:{port}/", timeout=10).text == "ok"
        assert all(_closed_by_server(s) for s in quiet)
    finally:
        for s in (*quiet, last):
            s.close()
        server.stop()


def test_a_client_that_stops_reading_its_reply_is_cut_off() -> None:
    clock = Clock()

    def app(environ, start_response):
        body = b"x" * (8 << 20) if environ["PATH_INFO"] == "/big" else b"ok"
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]

    server = HttpServer(app, "127.0.0.1", 0, clock=clock, threads=1)
    server.serve()
    try:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(server.address)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
            # one worker: this is answered once the big reply has been handed over
            assert _raw(server, b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").endswith(b"ok")
            with _on_log("nodemanager.http", "closed the connection") as closed:
                clock.now += IDLE_TIMEOUT + 1
                # reading now would move bytes, which is not idle: wait for the server's word first
                assert closed.wait(10)
            port = server.address[1]
            established = subprocess.run(["ss", "-tnH", "state", "established", f"sport = :{port}"],
                                         capture_output=True, text=True, check=True).stdout
            assert established.strip() == ""  # the server let go of it, unread reply and all
            assert _closed_by_server(sock)
    finally:
        server.stop()


def test_a_client_sending_its_headers_byte_by_byte_is_cut_off(status_server, clock: Clock) -> None:
    with _connect(status_server) as sock:
        sock.sendall(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for ch in b"X-Slow: 123456789012":  # 20 bytes, one a second: never idle, always late
            try:
                sock.sendall(bytes([ch]))
            except (BrokenPipeError, ConnectionResetError):
                break
            _server_has_read(status_server)
            clock.now += REQUEST_TIMEOUT / 10
        assert _closed_by_server(sock)
    assert requests.get(status_server.url + "/healthz", timeout=5).status_code == 200


def test_the_listen_backlog_holds_a_burst_of_clients(status_server) -> None:
    # a full accept queue drops SYNs, and the client retries only after a second
    port = status_server.address[1]
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[2]) >= 128, out  # LISTEN Recv-Q Send-Q(=backlog) ...
    replies: list[int] = []
    clients = [threading.Thread(target=lambda: replies.append(
        requests.get(status_server.url + "/metrics", timeout=10).status_code)) for _ in range(32)]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    assert replies == [200] * 32


@pytest.mark.parametrize("host, names, ok", [
    (None, (), True), ("127.0.0.1:8989", (), True), ("[::1]:8989", (), True),
    ("localhost:8989", (), True), ("LOCALHOST.", (), True), ("10.1.2.3", (), True),
    ("attacker.example:8989", (), False), ("attacker.example", ("headnode",), False),
    ("headnode:8989", ("headnode",), True), ("status.example.org", (".example.org",), True),
    ("example.org", (".example.org",), True), ("evilexample.org", (".example.org",), False),
    ("anything.example", ("*",), True), ("localhost.attacker.example", (), False),
])
def test_host_allowed(host, names, ok) -> None:
    assert host_allowed(host, names) is ok


def test_a_foreign_host_name_is_refused(status_server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    port = status_server.address[1]
    for path in ("/status.json", "/", "/metrics", "/healthz"):
        resp = requests.get(status_server.url + path, headers={"Host": f"rebind.example:{port}"},
                            timeout=5)
        assert resp.status_code == 421 and "[Manage] allowed_hosts" in resp.text
    resp = requests.post(status_server.url + "/admin/pause", timeout=5,
                         headers={"Host": "rebind.example", "Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 421 and status_server.admin.paused is None
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", socket.gethostname()):
        assert requests.get(status_server.url + "/status.json", headers={"Host": host},
                            timeout=5).status_code == 200
    assert _refused(status_server, "host") == 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "'rebind.example:" in warnings[0], warnings


def test_allowed_hosts_for_a_reverse_proxy(clock: Clock, tmp_path) -> None:
    server = StatusServer(ManageSettings(port=0, allowed_hosts=("status.example.org",)),
                          lambda: StatusView(report=sample_report(clock.now)), clock=clock).start()
    try:
        ok = requests.get(server.url + "/", headers={"Host": "status.example.org"}, timeout=5)
        other = requests.get(server.url + "/", headers={"Host": "other.example.org"}, timeout=5)
        assert (ok.status_code, other.status_code) == (200, 421)
    finally:
        server.stop()
    config = tmp_path / "nm.ini"
    config.write_text("[Manage]\nallowed_hosts = Status.Example.org, .corp.example\n")
    assert load(str(config)).manage.allowed_hosts == ("status.example.org", ".corp.example")
    config.write_text("[Manage]\nallowed_hosts = ok.example, http://bad/\n")
    with pytest.raises(ConfigError, match=r"nm\.ini:2.*'http://bad/' is not a host name"):
        load(str(config))


@pytest.mark.parametrize("headers, code", [
    (b"Content-Length: -1\r\n", 400), (b"Content-Length: 12abc\r\n", 400),
    (b"Content-Length: 1000000000\r\n", 413),
])
def test_a_bad_or_huge_content_length_is_refused_without_reading(status_server, headers: bytes,
                                                                code: int) -> None:
    # no body follows: a server that tried to read it would wait for ever
    reply = _raw(status_server, b"POST /admin/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Authorization: Bearer " + TOKEN.encode() + b"\r\n" + headers + b"\r\n")
    assert reply.startswith(b"HTTP/1.1 %d " % code), reply[:200]
    assert status_server.admin.paused is None


def test_a_chunked_body_is_capped_too(status_server) -> None:
    chunk = b"x" * 1000  # 5000 bytes in all, over the 4 KiB cap
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
    reply = _raw(status_server, b"POST /admin/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                 b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
    assert status_server.admin.paused is None
    # a small chunked body is read whole
    resp = requests.post(status_server.url + "/admin/pause", timeout=5,
                         headers={"Authorization": f"Bearer {TOKEN}"},
                         data=iter([b'{"reason": ', b'"maintenance"}']))
    assert resp.status_code == 200 and status_server.admin.paused == "maintenance"


def test_clients_that_go_away_mid_reply_leave_no_traceback(clock: Clock, caplog, capfd) -> None:
    caplog.set_level(logging.DEBUG)
    entered, go = threading.Semaphore(0), threading.Event()
    view = StatusView(report=sample_report(clock.now), last_cycle_at=clock.now)

    def source() -> StatusView:
        entered.release()
        go.wait(10)
        return view

    server = StatusServer(ManageSettings(port=0), source, clock=clock).start()
    try:
        for _ in range(10):
            go.clear()
            sock = _connect(server)
            sock.sendall(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert entered.acquire(timeout=10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset, while the server is building the reply
            go.set()
        go.set()
        assert requests.get(server.url + "/healthz", timeout=5).status_code == 200
    finally:
        server.stop()
    records = [r for r in caplog.records if r.name.startswith(("nodemanager", "waitress"))]
    loud = [r for r in records if r.exc_info or (r.levelno >= logging.INFO
                                                 and r.name != "nodemanager.status")]
    assert not loud, [r.getMessage() for r in loud]
    gone = [r for r in records if "disconnected" in r.getMessage()]
    assert len(gone) <= 10 and all(len(r.getMessage()) < 120 for r in gone)
    assert "Traceback" not in capfd.readouterr().err


def test_wrong_tokens_warn_once_a_minute_and_are_counted(status_server, clock: Clock,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    post = lambda: requests.post(status_server.url + "/admin/pause", timeout=5,  # noqa: E731
                                 headers={"Authorization": "Bearer guess"})
    assert all(post().status_code == 403 for _ in range(20))
    clock.now += 61
    assert post().status_code == 403
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2 and all("wrong token" in w for w in warnings), warnings
    assert "19 more" in warnings[1]
    assert _refused(status_server, "wrong_token") == 21
    assert requests.post(status_server.url + "/admin/pause", timeout=5).status_code == 401
    assert _refused(status_server, "no_token") == 1


def test_bind_takes_the_port_before_serving(clock: Clock) -> None:
    server = StatusServer(ManageSettings(port=0), lambda: StatusView(), clock=clock).bind()
    try:
        port = server.address[1]
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
        with pytest.raises(BindError, match=rf"cannot listen on 127.0.0.1:{port} "
                                            r"\(\[Manage\] address/port\)"):
            StatusServer(ManageSettings(port=port), lambda: StatusView()).bind()
        server.start()
        assert requests.get(server.url + "/healthz", timeout=5).status_code == 503
        head = requests.head(server.url + "/healthz", timeout=5)
        assert head.status_code == 503 and int(head.headers["Content-Length"]) > 0 and not head.content
    finally:
        server.stop()
    # stopped, bound or not, the port is free again
    unused = StatusServer(ManageSettings(port=port), lambda: StatusView()).bind()
    unused.stop()
    StatusServer(ManageSettings(port=port), lambda: StatusView()).bind().stop()

