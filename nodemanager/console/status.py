"""The status server: what the daemon is doing and why, per node, plus metrics, health and admin.

Interface for the daemon (everything it needs)::

    server = StatusServer(settings.manage, source=lambda: view, admin=admin_state,
                          registry=metrics.registry, stale_after=3 * settings.poll.cycle_interval,
                          secrets=settings_secrets(settings))
    server.bind()           # optional: take settings.manage.address:port now (BindError, an
                            # OSError naming [Manage] address/port); port 0: a free port
    server.start()          # binds unless bind() did, then serves; server.url
    ...                     # each cycle: publish a new StatusView(report=..., last_cycle_at=...)
    server.stop()

``source`` is called on every request and returns the latest
:class:`~nodemanager.console.status_document.StatusView` (an immutable
value: swap it, never mutate it). ``admin`` is the :class:`~nodemanager.console.admin.AdminState` the
controller reads each cycle. Run the server only when ``settings.port >= 0``.

Endpoints (all on the configured address, loopback by default):

* ``GET /status.json`` daemon counters and, per node: tuple, matched matrix rule (file:line),
  planned action, what blocks it in words, and when it next changes by time alone;
* ``GET /`` the operator's console (:mod:`nodemanager.console.page`): pool summary, "why not?",
  the node table (sort, filter, each node's history), refreshed in place;
* ``GET /metrics`` the private Prometheus registry;
* ``GET /healthz`` 200 when the last cycle finished within ``stale_after`` seconds, else 503 with why;
* ``GET /snapshot.json`` with the admin token, or without one from this host (``[Manage]
  loopback_snapshot``, default yes: a loopback peer naming a loopback Host, not forwarded by a
  proxy, and no ``allowed_hosts``): the last cycle's snapshot, the JSON ``nodemanager plan --snapshot`` reads (``plan
  --live`` previews an edit on it); 503 before the first cycle. Other hosts need the token
  because it holds addresses, cloud tags and HTCondor ads;
* ``POST /admin/hold|release|drain|cancel/NODE`` and ``POST /admin/pause|resume`` with
  ``Authorization: Bearer TOKEN``: 404 while no token is configured, 401 without the header,
  403 with a wrong token, 409 from an HA standby (nothing changed; ``leader`` names the head to
  ask). ``pause`` takes an optional JSON body ``{"reason": "..."}``.

Every request's ``Host`` must be a name of this server (:func:`~nodemanager.console.http_server.host_allowed`,
``[Manage] allowed_hosts``), else 421. Bodies over 4 KiB get 413; the connection limits are in
:mod:`nodemanager.console.http_server`. Nothing in a response or log line contains the token or any of
``secrets``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from nodemanager.core.clocks import monotonic_of
from nodemanager.console.admin_body import BadBody, admin_body
from nodemanager.console.admin import AdminChange, AdminNotSaved, AdminRefused, AdminState
from nodemanager.console.page import render_html
from nodemanager.console.http_server import HttpServer, LogThrottle, host_allowed, own_names
from nodemanager.model import EMPTY_MAP
from nodemanager.configuration.settings import ManageSettings, Settings
from nodemanager.console.status_document import StatusView, cycle_health, status_document

__all__ = ["StatusServer", "settings_secrets"]

log = logging.getLogger("nodemanager.status")

_NODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}")
_NODE_VERBS = ("hold", "release", "drain", "cancel")
_WITH_REASON = ("hold", "drain")   # node verbs that take the operator's reason
_GLOBAL_VERBS = ("pause", "resume")
_MAX_BODY = 4096

def settings_secrets(settings: Settings) -> tuple[str, ...]:
    """The secret values of a configuration (admin token, cloud keys, scheduler passwords): what
    the daemon passes as ``secrets`` so that no response ever shows them."""
    from nodemanager.configuration.config import SECRET_OPTIONS
    values = [settings.manage.token]
    for options in (settings.cloud.driver_args, settings.cloud.create_args,
                    settings.scheduler.options):
        values.extend(v for k, v in options.items() if k.lower() in SECRET_OPTIONS and v)
    return tuple(v for v in values if v)


def _redact(obj: Any, secrets: tuple[str, ...]) -> Any:
    if not secrets:
        return obj
    if isinstance(obj, str):
        for s in secrets:
            obj = obj.replace(s, "***")
        return obj
    if isinstance(obj, dict):
        return {k: _redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact(v, secrets) for v in obj]
    return obj


@dataclass(frozen=True)
class _Reply:
    code: int
    body: bytes
    ctype: str = "text/plain; charset=utf-8"
    extra: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)


def _text(code: int, text: str, extra: Mapping[str, str] = EMPTY_MAP) -> _Reply:
    return _Reply(code, text.encode(), extra=extra)


_SECURITY_HEADERS = (
    ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy",
     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
     "connect-src 'self'"),
)


class StatusServer:
    """The HTTP server described in the module docstring; :meth:`start` runs it in a thread."""

    def __init__(self, settings: ManageSettings, source: Callable[[], StatusView],
                 admin: AdminState | None = None, registry: CollectorRegistry | None = None, *,
                 clock: Callable[[], float] = time.time, stale_after: float = 300.0,
                 secrets: Iterable[str] = ()) -> None:
        self.settings = settings
        self.source = source
        self.admin = admin
        self.registry = registry
        self.clock = clock
        self.stale_after = stale_after
        self._token = settings.token.encode() if settings.token else b""
        self.secrets = tuple(s for s in {settings.token, *secrets} if s and len(s) >= 4)
        self._hosts = (*own_names(settings.address), *settings.allowed_hosts)
        self._throttle = LogThrottle(log, monotonic_of(clock))
        self._refused = Counter("nodemanager_http_refused",
                                "Requests refused by the status server, by reason (no_token, "
                                "wrong_token, host).", ["reason"], registry=None)
        self._http: HttpServer | None = None

    @property
    def admin_enabled(self) -> bool:
        return bool(self._token) and self.admin is not None

    @property
    def address(self) -> tuple[str, int]:
        if self._http is None:
            raise RuntimeError("status server not started")
        return self._http.address

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def bind(self) -> "StatusServer":
        """Take the configured address and port (port 0: a free port) without serving yet.

        Raises :class:`~nodemanager.console.http_server.BindError` (an OSError) naming the address and
        ``[Manage] address/port`` when it cannot; :meth:`start` then serves.
        """
        host, port = self.settings.address, self.settings.port
        if port < 0:
            raise ValueError("status server disabled ([Manage] port = -1)")
        if self._http is None:
            self._http = HttpServer(self.wsgi, host, port, clock=monotonic_of(self.clock), max_body=_MAX_BODY)
        return self

    def start(self) -> "StatusServer":
        """Bind (unless :meth:`bind` did) and serve in a daemon thread. Raises BindError (an
        OSError) naming the address when it cannot bind."""
        http = self.bind()._http
        assert http is not None
        if self.registry is not None:
            self.registry.register(self._refused)
        http.serve()
        if not _is_loopback(self.settings.address):
            log.warning("status server listens on %s:%d, reachable from other hosts",
                        self.settings.address, self.address[1])
        log.info("status server on %s (admin API %s)", self.url,
                 "enabled" if self.admin_enabled else "disabled: no [Manage] token")
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None
            if self.registry is not None:
                try:
                    self.registry.unregister(self._refused)
                except KeyError:  # bound but never started
                    pass

    # -- used by the request handler -------------------------------------------------------
    def document(self) -> dict[str, Any]:
        doc = status_document(self.source(), self.admin, self.clock(),
                              stale_after=self.stale_after, admin_enabled=self.admin_enabled)
        return _redact(doc, self.secrets)

    def health(self) -> tuple[bool, str]:
        return cycle_health(self.source(), self.clock(), self.stale_after)

    def check_token(self, header: str | None) -> int:
        """0 when the request may use the admin API, else the HTTP status to refuse it with."""
        if not self.admin_enabled:
            return 404
        if not header or not header.startswith("Bearer "):
            return 401
        given = header[len("Bearer "):].strip().encode()
        return 0 if hmac.compare_digest(given, self._token) else 403

    def resolve(self, node: str) -> str | None:
        """The cloud node id the operator means by ``node`` (id, name, worker or hostname), or
        None when no node of the last cycle (nor of the admin state) goes by that name."""
        admin = self.admin
        if admin is not None and (node in admin.held or node in admin.forced_drains):
            return node
        report = self.source().report
        if report is None:
            return node
        for e in report.plan.nodes:
            if node in (e.node_id, e.name, e.worker):
                return e.node_id
        for c in report.snapshot.cloud_nodes:
            if node in (c.id, c.name, c.hostname):
                return c.id
        return None

    def apply(self, verb: str, node: str | None, reason: str, by: str) -> AdminChange:
        admin = self.admin
        assert admin is not None
        if verb == "pause":
            change = admin.pause(reason, by=by)
        elif verb == "resume":
            change = admin.resume(by=by)
        else:
            assert node is not None
            change = (getattr(admin, verb)(node, by=by, reason=reason) if verb in _WITH_REASON
                      else getattr(admin, verb)(node, by=by))
        log.info("admin %s%s by %s: %s%s", verb, f" node={node}" if node else "", by,
                 change.detail, "" if change.changed else " (nothing changed)")
        return change

    # -- the WSGI application --------------------------------------------------------------
    def wsgi(self, environ: Mapping[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """Serve one request (waitress calls this in a worker thread)."""
        method = environ["REQUEST_METHOD"]
        path = urlsplit(environ.get("REQUEST_URI") or environ.get("PATH_INFO") or "/").path
        peer = environ.get("REMOTE_ADDR", "?")
        try:
            reply = self._route(method, path, environ, peer)
        except Exception:
            log.exception("status server: %s %s failed", method, path)
            reply = _text(500, "internal error (see the nodemanager log)\n")
        log.debug("%s %s %s: %d", peer, method, path, reply.code)
        start_response(f"{reply.code} {HTTPStatus(reply.code).phrase}", [
            ("Content-Type", reply.ctype), ("Content-Length", str(len(reply.body))),
            *_SECURITY_HEADERS, *reply.extra.items()])
        return [b""] if method == "HEAD" else [reply.body]

    def _refuse(self, reason: str, warning: str | None = None) -> None:
        """Count a refused request; warn (once a minute per reason at most)."""
        self._refused.labels(reason).inc()
        if warning:
            self._throttle.warning(reason, warning)

    def _route(self, method: str, path: str, environ: Mapping[str, Any], peer: str) -> _Reply:
        host: str | None = environ.get("HTTP_HOST")
        if not host_allowed(host, self._hosts):
            shown = repr((host or "")[:100])  # the client's text: bounded and quoted
            self._refuse("host", f"status server refused {method} {path[:100]} from {peer}: Host "
                                 f"{shown} is not a name of this server ([Manage] allowed_hosts)")
            return _text(421, f"this server does not answer to the name {shown}: add it to "
                              "[Manage] allowed_hosts\n")
        if method in ("GET", "HEAD") and path == "/snapshot.json":
            return self._snapshot(environ, peer)
        if method in ("GET", "HEAD"):
            return self._get(path)
        if method == "POST":
            return self._post(path, environ, peer)
        return _text(501, f"unsupported method {method}\n", {"Allow": "GET, HEAD, POST"})

    def _json(self, code: int, obj: Any, extra: Mapping[str, str] = EMPTY_MAP) -> _Reply:
        body = json.dumps(_redact(obj, self.secrets), indent=1) + "\n"
        return _Reply(code, body.encode(), "application/json", extra)

    def _get(self, path: str) -> _Reply:
        if path == "/status.json":
            return self._json(200, self.document())
        if path in ("/", "/index.html"):
            return _Reply(200, render_html(self.document()).encode(), "text/html; charset=utf-8")
        if path == "/metrics":
            if self.registry is None:
                return _text(404, "no metrics registry\n")
            return _Reply(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
        if path == "/healthz":
            ok, why = self.health()
            return _text(200 if ok else 503, _redact(why, self.secrets) + "\n")
        if path.startswith("/admin/"):
            return _text(405, "admin actions need POST\n", {"Allow": "POST"})
        return _text(404, "not found: try /, /status.json, /metrics, /healthz\n")

    def _check_admin(self, environ: Mapping[str, Any], path: str, peer: str) -> _Reply | None:
        """None when the request carries the admin token, else the reply refusing it."""
        refused = self.check_token(environ.get("HTTP_AUTHORIZATION"))
        if refused == 404:
            return self._json(404, {"error": "admin API disabled: no token configured ([Manage] token)"})
        if refused == 401:
            self._refuse("no_token")
            return self._json(401, {"error": "admin API needs 'Authorization: Bearer TOKEN'"},
                              {"WWW-Authenticate": 'Bearer realm="nodemanager"'})
        if refused == 403:
            self._refuse("wrong_token", f"admin request {path} from {peer} refused: wrong token")
            return self._json(403, {"error": "wrong token"})
        return None

    def _snapshot(self, environ: Mapping[str, Any], peer: str) -> _Reply:
        """``GET /snapshot.json``: the snapshot the last cycle planned, secrets redacted."""
        from nodemanager.snapshot import to_json
        local = self._from_this_host(environ, peer) and (
            not self._token or environ.get("HTTP_AUTHORIZATION") is None)
        refused = None if local else self._check_admin(environ, "/snapshot.json", peer)
        if refused is not None:
            return refused
        report = self.source().report
        if report is None:
            return self._json(503, {"error": "no cycle has finished yet: no snapshot to serve"})
        body = json.dumps(_redact(to_json(report.snapshot), self.secrets), separators=(",", ":"))
        return _Reply(200, body.encode(), "application/json")

    def _from_this_host(self, environ: Mapping[str, Any], peer: str) -> bool:
        """A read this host's users may make without the token: from a loopback peer, to a
        loopback Host name, not forwarded by a proxy on this host."""
        if not self.settings.loopback_snapshot or self.settings.allowed_hosts or not _is_loopback(peer):
            return False  # allowed_hosts: a reverse proxy serves this server to other hosts
        if environ.get("HTTP_X_FORWARDED_FOR") or environ.get("HTTP_FORWARDED"):
            return False
        host = str(environ.get("HTTP_HOST") or "")
        host = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
        return _is_loopback(host)

    def _post(self, path: str, environ: Mapping[str, Any], peer: str) -> _Reply:
        if not path.startswith("/admin/"):
            return _text(404, "not found\n")
        refused = self._check_admin(environ, path, peer)
        if refused is not None:
            return refused
        parts = path[len("/admin/"):].split("/")
        verb, node = parts[0], None
        if verb in _NODE_VERBS:
            if len(parts) != 2 or not _NODE_RE.fullmatch(unquote(parts[1])):
                return self._json(400, {"error": f"usage: POST /admin/{verb}/NODE "
                                                 "(NODE: a cloud id, node name or worker name)"})
            node = self.resolve(unquote(parts[1]))
            if node is None:
                return self._json(404, {"error": f"no node {unquote(parts[1])!r} in the last cycle"})
        elif verb not in _GLOBAL_VERBS or len(parts) != 1:
            return self._json(404, {"error": f"unknown admin action {path!r}: use hold, release, "
                                             "drain, cancel (with /NODE), pause or resume"})
        try:  # every admin verb reads its body: a bad one is a 400 whatever the verb
            fields = admin_body(environ["wsgi.input"].read())
        except BadBody as err:
            return self._json(400, {"error": f"{verb}: {err}"})
        reason = fields.get("reason", "") if verb == "pause" or verb in _WITH_REASON else ""
        try:
            change = self.apply(verb, node, reason, peer)
        except AdminRefused as standby:
            log.info("admin %s%s by %s refused: %s", verb, f" node={node}" if node else "", peer, standby)
            return self._json(409, {"error": str(standby), "leader": standby.leader})
        except AdminNotSaved as unsaved:
            log.warning("admin %s%s by %s refused: %s", verb, f" node={node}" if node else "", peer, unsaved)
            return self._json(503, {"error": str(unsaved), "applied": False})
        return self._json(200, change.to_json())


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
