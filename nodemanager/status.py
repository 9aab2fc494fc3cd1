"""The status server: what the daemon is doing and why, per node, plus metrics, health and admin.

Interface for the daemon (everything it needs)::

    server = StatusServer(settings.manage, source=lambda: view, admin=admin_state,
                          registry=metrics.registry, stale_after=3 * settings.poll.cycle_interval,
                          secrets=settings_secrets(settings))
    server.start()          # binds settings.manage.address:port (port 0: a free port); server.url
    ...                     # each cycle: publish a new StatusView(report=..., last_cycle_at=...)
    server.stop()

``source`` is called on every request and returns the latest :class:`StatusView` (an immutable
value: swap it, never mutate it). ``admin`` is the :class:`~nodemanager.admin.AdminState` the
controller reads each cycle. Run the server only when ``settings.port >= 0``.

Endpoints (all on the configured address, loopback by default):

* ``GET /status.json`` daemon counters and, per node: tuple, matched matrix rule (file:line),
  planned action, what blocks it in words, and when it next changes by time alone;
* ``GET /`` the same as an HTML table, sortable by clicking a header (``#sort=COLUMN`` or
  ``#sort=-COLUMN`` in the URL sorts on load);
* ``GET /metrics`` the private Prometheus registry;
* ``GET /healthz`` 200 when the last cycle finished within ``stale_after`` seconds, else 503 with why;
* ``POST /admin/hold|release|drain|cancel/NODE`` and ``POST /admin/pause|resume`` with
  ``Authorization: Bearer TOKEN``: 404 while no token is configured, 401 without the header,
  403 with a wrong token. ``pause`` takes an optional JSON body ``{"reason": "..."}``.

Nothing in a response or log line contains the token or any of ``secrets``.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
import json
import logging
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from nodemanager.admin import AdminChange, AdminState
from nodemanager.model import EMPTY_MAP, CycleReport
from nodemanager.settings import ManageSettings, Settings

__all__ = ["StatusServer", "StatusView", "status_document", "render_html", "when_text",
           "settings_secrets", "NODE_COLUMNS"]

log = logging.getLogger("nodemanager.status")

_NODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}")
_NODE_VERBS = ("hold", "release", "drain", "cancel")
_GLOBAL_VERBS = ("pause", "resume")
_MAX_BODY = 4096

# (JSON key, column header) of the node table, in display order.
NODE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "node"), ("size", "size"), ("worker", "worker"), ("raw_state", "scheduler state"),
    ("tuple_text", "tuple"), ("rule", "matrix rule"), ("matrix_action", "matrix says"),
    ("planned_action", "planned"), ("blocked_by", "blocked by"), ("why", "why"),
    ("next_change_text", "next change"), ("last_outcome", "last outcome"),
)


@dataclass(frozen=True)
class StatusView:
    """What the daemon publishes for the status server: the last cycle and its counters.

    ``last_cycle_at`` is the wall time the last cycle finished (None before the first);
    ``counters`` are the daemon's own totals (cycles, errors...), shown as they are.
    """

    report: CycleReport | None = None
    counters: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)
    started_at: float = 0.0
    last_cycle_at: float | None = None
    version: str = ""


def when_text(at: float | None, what: str | None, now: float) -> str | None:
    """``"idle grace ends 14:05:10 UTC (in 3m 20s)"``; the date is added when not today."""
    if at is None:
        return None
    t = datetime.fromtimestamp(at, timezone.utc)
    same_day = t.date() == datetime.fromtimestamp(now, timezone.utc).date()
    stamp = t.strftime("%H:%M:%S UTC" if same_day else "%Y-%m-%d %H:%M:%S UTC")
    delta = at - now
    rel = f"in {_duration(delta)}" if delta >= 0 else f"{_duration(-delta)} ago"
    return f"{what or 'changes'} {stamp} ({rel})"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def _health(view: StatusView, now: float, stale_after: float) -> tuple[bool, str]:
    if view.last_cycle_at is None:
        return False, f"no cycle has finished yet (up {_duration(now - view.started_at)})"
    age = now - view.last_cycle_at
    if age > stale_after:
        return False, (f"last cycle finished {_duration(age)} ago "
                       f"(limit {_duration(stale_after)}): the controller is stuck or stopped")
    return True, f"ok: last cycle finished {_duration(age)} ago"


def status_document(view: StatusView, admin: AdminState | None, now: float, *,
                    stale_after: float = 300.0, admin_enabled: bool = False) -> dict[str, Any]:
    """The ``/status.json`` document (also what the HTML page shows)."""
    healthy, health = _health(view, now, stale_after)
    doc: dict[str, Any] = {
        "version": view.version, "now": now, "now_text": "generated " + datetime.fromtimestamp(now, timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC"),
        "started_at": view.started_at, "last_cycle_at": view.last_cycle_at,
        "healthy": healthy, "health": health, "counters": dict(view.counters),
        "admin": {"enabled": admin_enabled, **(admin.to_json() if admin else {})},
    }
    report = view.report
    if report is None:
        doc.update(nodes=[], unpaired_workers=[], outcomes=[], notes=[], frozen=None,
                   paused=doc["admin"].get("paused"),
                   matrix={"sha256": None, "error": None}, polls={}, summary={})
        return doc
    snap, plan = report.snapshot, report.plan
    admin_json = doc["admin"]
    held = set(snap.held) | set(admin_json.get("held", ()))
    forced = set(snap.forced_drains) | set(admin_json.get("forced_drains", ()))
    last_outcome = {o.node: o for o in report.outcomes}
    in_flight = {f.node: f for f in snap.in_flight}
    cloud = {c.id: c for c in snap.cloud_nodes}
    nodes = []
    for e in plan.nodes:
        o = last_outcome.get(e.node_id) or last_outcome.get(e.name)
        f = in_flight.get(e.node_id)
        c = cloud.get(e.node_id)
        nodes.append({
            "node_id": e.node_id, "name": e.name, "size": e.size, "worker": e.worker,
            "raw_state": e.raw_state, "tuple": dict(zip(
                ("worker_state", "window", "boot_grace", "idle_grace"), e.tuple.as_tuple())),
            "tuple_text": str(e.tuple), "rule": e.rule, "matrix_action": e.matrix_action.to_json(),
            "planned_action": e.action.value if e.action else None,
            "blocked_by": e.blocked_by, "why": e.reason,
            "next_change": e.next_change,
            "next_change_text": when_text(e.next_change, e.next_change_what, report.snapshot.now),
            "held": e.node_id in held or e.name in held,
            "forced_drain": e.node_id in forced or e.name in forced,
            "in_flight": ({"action": f.action, "since": f.since,
                           "for_seconds": round(snap.now - f.since, 1)} if f else None),
            "launched_at": c.launched_at if c else None,
            "last_outcome": f"{o.kind} {o.result}: {o.detail}" if o else None,
        })
    paired = {e.worker for e in plan.nodes if e.worker}
    doc.update(
        cycle_at=snap.now, frozen=plan.frozen, paused=snap.paused or admin_json.get("paused"),
        matrix={"sha256": report.matrix_hash or None, "error": report.matrix_error},
        polls={k: {"at": v, "age_seconds": round(now - v, 1)} for k, v in snap.polled_at.items()},
        summary=_summary(report), notes=list(plan.notes),
        nodes=nodes,
        unpaired_workers=[{"name": w.name, "state": w.state, "draining": w.draining,
                           "drain_reason": w.drain_reason}
                          for w in snap.workers if w.name not in paired],
        outcomes=[{"kind": o.kind, "node": o.node, "result": o.result, "detail": o.detail,
                   "at": o.at, "size": o.size} for o in report.outcomes],
    )
    return doc


def _summary(report: CycleReport) -> dict[str, Any]:
    plan = report.plan

    def count(values: Iterable[str | None]) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in values:
            if v is not None:
                out[v] = out.get(v, 0) + 1
        return dict(sorted(out.items()))

    return {
        "nodes": len(plan.nodes),
        "by_worker_state": count(e.tuple.worker_state for e in plan.nodes),
        "planned": count(i.kind.value for i in plan.items),
        "blocked": count(e.blocked_by for e in plan.nodes),
        "boots": [{"size": b.size, "count": b.count, "reason": b.reason} for b in plan.boots],
        "demand": {"jobs": sum(d.count for d in report.snapshot.demand),
                   "cpus": sum(d.count * d.cpus for d in report.snapshot.demand)},
    }


def settings_secrets(settings: Settings) -> tuple[str, ...]:
    """The secret values of a configuration (admin token, cloud keys, scheduler passwords): what
    the daemon passes as ``secrets`` so that no response ever shows them."""
    from nodemanager.config import SECRET_OPTIONS
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


_CSS = """
body{font-family:system-ui,sans-serif;margin:1em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em} .summary span{margin-right:1.5em}
.bad{color:#a00;font-weight:bold} .ok{color:#070}
table{border-collapse:collapse;font-size:.9em;margin-top:.8em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#eee;cursor:pointer;user-select:none;position:sticky;top:0}
th.asc::after{content:" \\25B2"} th.desc::after{content:" \\25BC"}
tr.planned td{background:#fff6d6} tr.blocked td{background:#f3f3f3}
td.rule,td.tuple{font-family:monospace;white-space:nowrap} td.name{white-space:nowrap}
"""

_JS = """
(function(){
  var table=document.getElementById('nodes'); if(!table) return;
  var heads=table.tHead.rows[0].cells, body=table.tBodies[0];
  function sortBy(key, desc){
    var idx=-1;
    for(var i=0;i<heads.length;i++){heads[i].className='';
      if(heads[i].getAttribute('data-key')===key) idx=i;}
    if(idx<0) return;
    heads[idx].className=desc?'desc':'asc';
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      var x=a.cells[idx].getAttribute('data-sort')||a.cells[idx].textContent;
      var y=b.cells[idx].getAttribute('data-sort')||b.cells[idx].textContent;
      var nx=parseFloat(x), ny=parseFloat(y), c;
      if(!isNaN(nx)&&!isNaN(ny)&&String(nx)===x&&String(ny)===y) c=nx-ny;
      else c=x.localeCompare(y);
      return desc?-c:c;});
    rows.forEach(function(r){body.appendChild(r);});
    table.setAttribute('data-sorted', (desc?'-':'')+key);
  }
  for(var i=0;i<heads.length;i++){(function(h){h.addEventListener('click',function(){
    var key=h.getAttribute('data-key'), desc=h.className==='asc';
    sortBy(key, desc); history.replaceState(null,'','#sort='+(desc?'-':'')+key);});})(heads[i]);}
  var m=/sort=(-?)([a-z_]+)/.exec(location.hash);
  if(m) sortBy(m[2], m[1]==='-');
})();
"""


def render_html(doc: Mapping[str, Any]) -> str:
    """The status page: a summary line and one table row per node (from :func:`status_document`)."""
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width'>",
             "<title>nodemanager status</title><style>", _CSS, "</style></head><body>",
             "<h1>nodemanager</h1><div class='summary'>"]
    health_cls = "ok" if doc.get("healthy") else "bad"
    parts.append(f"<span class='{health_cls}' id='health'>{e(str(doc.get('health')))}</span>")
    if doc.get("paused"):
        parts.append(f"<span class='bad' id='paused'>paused: {e(str(doc['paused']))}</span>")
    if doc.get("frozen"):
        parts.append(f"<span class='bad' id='frozen'>actions frozen: {e(str(doc['frozen']))}</span>")
    matrix = doc.get("matrix") or {}
    if matrix.get("error"):
        parts.append(f"<span class='bad'>matrix error (running the last good one): "
                     f"{e(str(matrix['error']))}</span>")
    if matrix.get("sha256"):
        parts.append(f"<span>matrix {e(str(matrix['sha256'])[:12])}</span>")
    for name, poll in sorted((doc.get("polls") or {}).items()):
        parts.append(f"<span>{e(name)} polled {e(_duration(poll['age_seconds']))} ago</span>")
    summary = doc.get("summary") or {}
    if summary:
        demand = summary.get("demand", {})
        parts.append(f"<span>{summary.get('nodes', 0)} nodes</span>")
        parts.append(f"<span>queue: {demand.get('jobs', 0)} jobs, {demand.get('cpus', 0)} "
                     f"cores</span>")
        for b in summary.get("boots", []):
            parts.append(f"<span>boot {b['count']} x {e(b['size'])}: {e(b['reason'])}</span>")
    parts.append(f"<span>{e(str(doc.get('now_text') or ''))}</span></div>")
    if doc.get("notes"):
        parts.append("<ul id='notes'>" + "".join(f"<li>{e(str(n))}</li>" for n in doc["notes"])
                     + "</ul>")
    counters = doc.get("counters") or {}
    if counters:
        parts.append("<div class='summary' id='counters'>" + "".join(
            f"<span>{e(str(k))}: {e(str(v))}</span>" for k, v in sorted(counters.items()))
            + "</div>")
    parts.append("<table id='nodes'><thead><tr>")
    for key, title in NODE_COLUMNS:
        parts.append(f"<th data-key='{key}'>{e(title)}</th>")
    parts.append("</tr></thead><tbody>")
    for node in doc.get("nodes", []):
        cls = "planned" if node.get("planned_action") else \
            "blocked" if node.get("blocked_by") else ""
        parts.append(f"<tr class='node {cls}' data-node='{e(node['node_id'])}'>")
        for key, _ in NODE_COLUMNS:
            value = node.get(key)
            text = "" if value is None else str(value)
            if key == "name" and node.get("held"):
                text += " (held)"
            if key == "planned_action" and node.get("in_flight"):
                f = node["in_flight"]
                text = (text + " " if text else "") + \
                    f"[{f['action']} under way {_duration(f['for_seconds'])}]"
            attrs = ""
            if key == "next_change_text" and node.get("next_change") is not None:
                attrs = f" data-sort='{node['next_change']:.0f}'"
            if key == "rule" and text:
                attrs = f" title='{e(text)}'"
                text = text.rsplit("/", 1)[-1]
            parts.append(f"<td class='{key.split('_')[0]}'{attrs}>{e(text)}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    workers = doc.get("unpaired_workers") or []
    if workers:
        parts.append("<h2 style='font-size:1em'>Workers without a cloud node</h2><ul id='workers'>")
        for w in workers:
            extra = f", draining ({w['drain_reason']})" if w.get("draining") else ""
            parts.append(f"<li>{e(w['name'])}: {e(str(w['state']))}{e(extra)}</li>")
        parts.append("</ul>")
    parts.append("<script>" + _JS + "</script></body></html>")
    return "".join(parts)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: "StatusServer"


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
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def admin_enabled(self) -> bool:
        return bool(self._token) and self.admin is not None

    @property
    def address(self) -> tuple[str, int]:
        if self._httpd is None:
            raise RuntimeError("status server not started")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> "StatusServer":
        """Bind (unless :meth:`bind` did) and serve in a daemon thread."""
        if self._httpd is None:
            self.bind()
        assert self._httpd is not None
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="status-server",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def bind(self) -> "StatusServer":
        """Take the port without serving yet. Raises OSError naming the address when it cannot bind."""
        host, port = self.settings.address, self.settings.port
        if port < 0:
            raise ValueError("status server disabled ([Manage] port = -1)")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_cls = type("_Server", (_HTTPServer,), {"address_family": family})
        try:
            httpd = server_cls((host, port), _Handler)
        except OSError as err:
            raise OSError(err.errno, f"status server cannot listen on {host}:{port} "
                                     f"([Manage] address/port): {err.strerror}") from None
        httpd.app = self
        self._httpd = httpd
        if not _is_loopback(host):
            log.warning("status server listens on %s:%d, reachable from other hosts",
                        host, self.address[1])
        log.info("status server on %s (admin API %s)", self.url,
                 "enabled" if self.admin_enabled else "disabled: no [Manage] token")
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            if self._thread is not None:          # shutdown() waits for serve_forever to end
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- used by the handler ----------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        doc = status_document(self.source(), self.admin, self.clock(),
                              stale_after=self.stale_after, admin_enabled=self.admin_enabled)
        return _redact(doc, self.secrets)

    def health(self) -> tuple[bool, str]:
        return _health(self.source(), self.clock(), self.stale_after)

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
            change = getattr(admin, verb)(node, by=by)
        log.info("admin %s%s by %s: %s%s", verb, f" node={node}" if node else "", by,
                 change.detail, "" if change.changed else " (nothing changed)")
        return change


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "nodemanager"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, code: int, body: str | bytes, ctype: str = "text/plain; charset=utf-8",
              extra: Mapping[str, str] = EMPTY_MAP) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, code: int, obj: Any, extra: Mapping[str, str] = EMPTY_MAP) -> None:
        self._send(code, json.dumps(_redact(obj, self.server.app.secrets), indent=1) + "\n",
                   "application/json", extra)

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("status server: %s %s failed", self.command, urlsplit(self.path).path)
            self._send(500, "internal error (see the nodemanager log)\n")

    def do_GET(self) -> None:
        self._guard(self._get)

    def do_HEAD(self) -> None:
        self._guard(self._get)

    def do_POST(self) -> None:
        self._guard(self._post)

    def _get(self) -> None:
        app, path = self.server.app, urlsplit(self.path).path
        if path == "/status.json":
            self._json(200, app.document())
        elif path in ("/", "/index.html"):
            self._send(200, render_html(app.document()), "text/html; charset=utf-8")
        elif path == "/metrics":
            if app.registry is None:
                self._send(404, "no metrics registry\n")
            else:
                self._send(200, generate_latest(app.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok, why = app.health()
            self._send(200 if ok else 503, _redact(why, app.secrets) + "\n")
        elif path.startswith("/admin/"):
            self._send(405, "admin actions need POST\n", extra={"Allow": "POST"})
        else:
            self._send(404, "not found: try /, /status.json, /metrics, /healthz\n")

    def _post(self) -> None:
        app, path = self.server.app, urlsplit(self.path).path
        if not path.startswith("/admin/"):
            self._send(404, "not found\n")
            return
        refused = app.check_token(self.headers.get("Authorization"))
        if refused == 404:
            self._json(404, {"error": "admin API disabled: no token configured ([Manage] token)"})
            return
        if refused == 401:
            self._json(401, {"error": "admin API needs 'Authorization: Bearer TOKEN'"},
                       {"WWW-Authenticate": 'Bearer realm="nodemanager"'})
            return
        if refused == 403:
            log.warning("admin request %s from %s refused: wrong token", path,
                        self.client_address[0])
            self._json(403, {"error": "wrong token"})
            return
        parts = path[len("/admin/"):].split("/")
        verb, node = parts[0], None
        if verb in _NODE_VERBS:
            if len(parts) != 2 or not _NODE_RE.fullmatch(unquote(parts[1])):
                self._json(400, {"error": f"usage: POST /admin/{verb}/NODE "
                                          "(NODE: a cloud id, node name or worker name)"})
                return
            node = app.resolve(unquote(parts[1]))
            if node is None:
                self._json(404, {"error": f"no node {unquote(parts[1])!r} in the last cycle"})
                return
        elif verb not in _GLOBAL_VERBS or len(parts) != 1:
            self._json(404, {"error": f"unknown admin action {path!r}: use hold, release, "
                                      "drain, cancel (with /NODE), pause or resume"})
            return
        reason = ""
        if verb == "pause":
            try:
                reason = self._reason()
            except ValueError as err:
                self._json(400, {"error": str(err)})
                return
        change = app.apply(verb, node, reason, self.client_address[0])
        self._json(200, change.to_json())

    def _reason(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            raise ValueError(f"body too large (more than {_MAX_BODY} bytes)")
        if not length:
            return ""
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as err:
            raise ValueError(f"body is not JSON: {err}") from None
        reason = body.get("reason", "") if isinstance(body, dict) else None
        if not isinstance(reason, str):
            raise ValueError('body must be {"reason": "..."}')
        return "".join(ch for ch in reason if ch.isprintable())[:200]
