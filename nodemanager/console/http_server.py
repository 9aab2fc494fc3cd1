"""The HTTP transport of the status server: waitress, with the limits a server on a network needs.

Why waitress and not ``http.server``: waitress reads requests in one non-blocking I/O thread and
hands only complete requests to a fixed pool of worker threads, so idle or slow connections cost
a socket, never a thread; it parses Content-Length strictly (digits only), caps bodies (chunked
ones too) before the application sees them, listens with a large backlog and keeps connections
alive for scrapers. It is pure Python and maintained by the Pylons project.

On top of waitress this module adds what it lacks: a deadline for reading a whole request (a
client that sends its headers byte by byte is cut off), idle connections closed on the injected
clock, client disconnects logged at DEBUG, the Host header check against DNS rebinding
(:func:`host_allowed`) and :class:`LogThrottle` for warnings a stranger can trigger at will.

Use::

    server = HttpServer(wsgi_app, "127.0.0.1", 8989, clock=time.monotonic)  # binds (BindError)
    server.serve()        # accepts and serves in a daemon thread
    server.stop()
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from typing import Any, Callable, Iterable

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

__all__ = ["BindError", "HttpServer", "LogThrottle", "host_allowed", "own_names", "IDLE_TIMEOUT",
           "REQUEST_TIMEOUT", "THREADS", "BACKLOG", "CONNECTION_LIMIT"]

log = logging.getLogger("nodemanager.http")

IDLE_TIMEOUT = 30.0      # a connection with no request under way and no bytes moved is closed
REQUEST_TIMEOUT = 10.0   # a request (headers and body) must arrive within this, however slowly
THREADS = 4              # worker threads: requests served at once (the rest wait, holding no thread)
BACKLOG = 1024           # the kernel's queue of connections not yet accepted
CONNECTION_LIMIT = 500   # open connections at most; past it new ones wait in the backlog
CROWDED_IDLE = 1.0       # the idle timeout while the server is at its connection limit


class BindError(OSError):
    """The server cannot listen on the configured address and port (the message names both and
    the ``[Manage]`` options)."""


class LogThrottle:
    """At most one WARNING per ``every`` seconds per kind of event; the events in between are
    counted and the count is given on the next line of that kind."""

    def __init__(self, logger: logging.Logger, clock: Callable[[], float], every: float = 60.0) -> None:
        self._log, self._clock, self._every = logger, clock, every
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, int]] = {}  # kind -> (time of last line, events since)

    def warning(self, kind: str, message: str) -> None:
        now = self._clock()
        with self._lock:
            last, missed = self._state.get(kind, (float("-inf"), 0))
            if now - last < self._every:
                self._state[kind] = (last, missed + 1)
                return
            self._state[kind] = (now, 0)
        more = f" (and {missed} more like it in the last {now - last:.0f}s)" if missed else ""
        self._log.warning("%s%s", message, more)


def _host_part(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def host_allowed(host_header: str | None, names: Iterable[str]) -> bool:
    """Whether a request's ``Host`` may be served: a DNS-rebinding page reaches the server under
    the attacker's own name, which is none of these.

    Allowed: no Host at all (not a browser), an IP address (no DNS involved), ``localhost``, and
    ``names`` (the bound address, this machine's host name and ``[Manage] allowed_hosts``; an
    entry ``.example.org`` allows every name under it, ``*`` allows any Host).
    """
    if not host_header:
        return True
    host = _host_part(host_header)
    if _is_ip(host) or host == "localhost":
        return True
    for name in names:
        name = name.strip().lower().rstrip(".")
        if name == "*" or host == name or (name.startswith(".") and
                                           (host.endswith(name) or host == name[1:])):
            return True
    return False


def own_names(address: str) -> tuple[str, ...]:
    """The names this machine answers to without configuration: the bound address and the host
    name (short and as set)."""
    hostname = socket.gethostname().lower()
    return tuple({address.lower(), hostname, hostname.split(".", 1)[0]} - {""})


class _Demoted(logging.LoggerAdapter):
    """A waitress logger whose messages starting with ``prefix`` (nothing an operator can act
    on: a client that went away, requests waiting for a worker thread) are logged at DEBUG."""

    def __init__(self, name: str, prefix: str) -> None:
        super().__init__(logging.getLogger(name), {})
        self.prefix = prefix

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        if str(msg).startswith(self.prefix):
            level = logging.DEBUG
        self.logger.log(level, msg, *args, **kwargs)


class _Channel(HTTPChannel):
    """One connection; remembers on the server's clock when bytes last moved and when the
    request being read began."""

    logger = _Demoted("waitress", "Client disconnected")
    server: "_Server"

    def __init__(self, server: "_Server", sock: socket.socket, addr: Any, adj: Adjustments,
                 map: Any = None) -> None:  # noqa: A002 (waitress's signature)
        self.nm_active = server.clock()
        self.nm_request_since: float | None = None
        super().__init__(server, sock, addr, adj, map)

    def received(self, data: bytes) -> bool:
        now = self.server.clock()
        self.nm_active = now
        started = now if self.nm_request_since is None else self.nm_request_since
        done = super().received(data)
        self.nm_request_since = started if self.request is not None else None
        return done

    def _flush_some(self, do_close: bool = True) -> bool:
        # called by the I/O thread and by a worker writing its reply: both are progress
        sent = bool(super()._flush_some(do_close=do_close))
        if sent:
            self.nm_active = self.server.clock()
        return sent


class _Server(TcpWSGIServer):
    channel_class = _Channel
    clock: Callable[[], float] = time.monotonic
    idle_timeout = IDLE_TIMEOUT
    request_timeout = REQUEST_TIMEOUT

    def maintenance(self, now: float) -> None:
        """Close connections that are slow to send their request, or idle (waitress's own check
        runs on the wall clock and only looks at idleness). At the connection limit, a
        connection quiet for a second counts as idle: new clients wait no longer than that."""
        now = self.clock()
        crowded = len(self._map) >= self.adj.connection_limit
        idle_after = CROWDED_IDLE if crowded else self.idle_timeout
        doomed: list[tuple[_Channel, str]] = []
        for channel in list(self.active_channels.values()):
            since = channel.nm_request_since
            if since is not None and now - since > self.request_timeout:
                why = f"request not complete after {self.request_timeout:.0f}s"
            elif not channel.requests and now - channel.nm_active > idle_after:
                why = f"idle for {idle_after:.0f}s" + (" with the server full" if crowded else "")
            else:
                continue
            doomed.append((channel, why))
        if doomed:
            # not will_close: a client that stopped reading never makes its socket writable;
            # closed on the next turn of the loop, not while it walks the socket map
            self.trigger.pull_trigger(lambda: self._close(doomed))

    def _close(self, doomed: list[tuple[_Channel, str]]) -> None:
        for channel, why in doomed:
            if self._map.get(channel._fileno) is channel:
                channel.handle_close()
                log.debug("closed the connection from %s: %s", channel.addr[0], why)


class HttpServer:
    """A WSGI application served by waitress on ``host:port`` (port 0: a free port).

    The constructor binds and listens (raising :class:`BindError`; connections wait in the
    backlog), :meth:`serve` starts accepting in a daemon thread, :meth:`stop` closes every
    connection and joins the threads.
    """

    def __init__(self, app: Callable[..., Any], host: str, port: int, *,
                 clock: Callable[[], float] = time.monotonic, max_body: int = 4096,
                 idle_timeout: float = IDLE_TIMEOUT, request_timeout: float = REQUEST_TIMEOUT,
                 threads: int = THREADS, connection_limit: int = CONNECTION_LIMIT,
                 ident: str = "nodemanager") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        adj = Adjustments(
            host=host, port=port, ipv4=family == socket.AF_INET, ipv6=family == socket.AF_INET6,
            threads=threads, backlog=BACKLOG,
            connection_limit=connection_limit + 2,  # waitress counts its listener and trigger
            # waitress refuses a body of max_request_body_size bytes or more
            max_request_body_size=max_body + 1, max_request_header_size=16384,
            cleanup_interval=1,
            log_socket_errors=False, ident=ident, expose_tracebacks=False,
            # a proxy's Forwarded/X-Forwarded-* reach the app (never trusted: they mark a request
            # a proxy passed on, which is not this host's own read)
            clear_untrusted_proxy_headers=False,
            url_scheme="http")
        sockinfo = (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, (host, port))
        server_cls = type("_BoundServer", (_Server,), {
            "clock": staticmethod(clock), "idle_timeout": idle_timeout,
            "request_timeout": request_timeout})
        dispatcher = ThreadedTaskDispatcher()  # its threads start in serve(): none leak on BindError
        dispatcher.queue_logger = _Demoted("waitress.queue", "Task queue depth")
        self._threads = threads
        server = None
        # our own socket: waitress would set IPV6_V6ONLY, and "::" serves IPv4 clients too
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            server = server_cls(app, map={}, _start=False, _sock=sock, adj=adj,
                                sockinfo=sockinfo, dispatcher=dispatcher)
            # listen now: a port only bound (SO_REUSEADDR) could be bound by another process too
            server.accept_connections()
        except OSError as err:
            (server or sock).close()
            raise BindError(err.errno, f"status server cannot listen on {host}:{port} "
                                       f"([Manage] address/port): {err.strerror}") from None
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return str(self._server.effective_host), int(self._server.effective_port)

    def serve(self) -> None:
        """Accept and serve in a daemon thread (returns at once)."""
        self._server.task_dispatcher.set_thread_count(self._threads)
        self._thread = threading.Thread(target=self._server.run, name="status-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the listening socket and every connection; wait for the threads (5 s at most)."""
        server = self._server
        if self._thread is not None:
            # closed from inside the I/O thread: the socket map is not shared across threads
            try:
                server.trigger.pull_trigger(lambda: _close_all(server))
            except OSError:  # the wake-up pipe is gone (seen once in a full test run): close here
                _close_all(server)
            self._thread.join(timeout=5)
            self._thread = None
        else:
            _close_all(server)
        server.task_dispatcher.shutdown(timeout=5)


def _close_all(server: TcpWSGIServer) -> None:
    for dispatcher in list(server._map.values()):
        dispatcher.close()
    server._map.clear()
