"""The operator's console: the HTML page of the status server, from the ``/status.json`` document.

One renderer (here, in Python) builds the whole page; the inline script only (1) shows every time
(an element with ``data-at``) in the browser's local zone with a live "in 2m" / "3m ago",
(2) sorts and filters the node table, (3) re-fetches the page every ``data-refresh`` seconds and
swaps the changed parts in place, keeping the scroll position, the filter text, the sort column
and the opened node histories. The view state is also in the URL: ``#sort=-name&filter=small&
open=i-1,i-2`` (for links and tests; ``refresh=SECONDS`` changes the period). No external JS or CSS: the page works offline.
"""

from __future__ import annotations

import html
from typing import Any, Mapping

from nodemanager.console.charts import CHART_CSS, charts_html
from nodemanager.console.limits_page import limits_html
from nodemanager.console.node_table import NODE_COLUMNS, at_html, nodes_html, recent_html
from nodemanager.text import counted, duration

__all__ = ["render_html", "header_level", "NODE_COLUMNS", "REFRESH_SECONDS"]

REFRESH_SECONDS = 15

_CSS = """
body{font-family:system-ui,sans-serif;margin:1em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1em;margin:1em 0 .3em}
.summary span{margin-right:1.5em}
.bad{color:#a00;font-weight:bold} .ok{color:#070}
.warn{background:#ffbf00;color:#222;font-weight:bold;padding:0 .4em;border-radius:3px}
table{border-collapse:collapse;font-size:.9em;margin-top:.4em}
#nodes{width:100%;font-size:.82em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
#nodes th{background:#eee;cursor:pointer;user-select:none;position:sticky;top:0}
th.asc::after{content:" \\25B2"} th.desc::after{content:" \\25BC"}
tr.planned td{background:#fff6d6} tr.blocked td{background:#f3f3f3}
td.rule,td.tuple{font-family:monospace;font-size:.95em} td.name{white-space:nowrap} td.tuple{min-width:10em}
#pool{display:flex;flex-wrap:wrap;gap:1em;margin:.6em 0}
.card{border:1px solid #ccc;border-radius:4px;padding:.4em .7em;min-width:11em}
.card h2{margin:0 0 .2em;font-size:.95em;color:#555} .card table{margin:0;font-size:.85em}
.card td{border:0;padding:0 .6em 0 0} .big{font-size:1.4em;font-weight:bold}
.binds{color:#a00;font-weight:bold} #whynot li{margin:.15em 0}
.reason{font-family:monospace;background:#eee;border-radius:3px;padding:0 4px}
details ol,tr.hist ol{margin:.2em 0 .2em 1.4em;padding:0;font-size:.95em}
tr.hist td{background:#fafcff;padding:.3em 1em .5em} a.toggle{white-space:nowrap;color:#05a}
td.why{min-width:12em} td.next{min-width:8em} td.last{min-width:8em} td.history{white-space:nowrap}
.ev-outcome{color:#05a} .ev-state{color:#870} .controls{margin:.6em 0}
.beside{color:#555;font-family:sans-serif;font-style:italic}
"""

_JS = """
(function(){
  var loaded=Date.now(), ref=parseFloat(document.body.getAttribute('data-now'));
  function pad(n){return (n<10?'0':'')+n;}
  function dur(s){s=Math.round(Math.abs(s)); if(s<60) return s+'s'; var m=Math.floor(s/60); s%=60;
    if(m<60) return m+'m '+pad(s)+'s'; var h=Math.floor(m/60); m%=60;
    if(h<48) return h+'h '+pad(m)+'m'; return Math.floor(h/24)+'d '+pad(h%24)+'h';}
  function stamp(at,now){var d=new Date(at*1000), n=new Date(now*1000);
    var t=pad(d.getHours())+':'+pad(d.getMinutes())+':'+pad(d.getSeconds());
    if(d.toDateString()!==n.toDateString())
      t=d.getFullYear()+'-'+pad(d.getMonth()+1)+'-'+pad(d.getDate())+' '+t;
    return t;}
  function times(){var now=ref+(Date.now()-loaded)/1000, els=document.querySelectorAll('[data-at]');
    for(var i=0;i<els.length;i++){var el=els[i], at=parseFloat(el.getAttribute('data-at'));
      var rel=at>=now?'in '+dur(at-now):dur(now-at)+' ago', what=el.getAttribute('data-what');
      el.textContent=(what?what+' ':'')+stamp(at,now)+' ('+rel+')';
      if(el.tagName==='TD') el.setAttribute('data-sort', at.toFixed(0));}}
  var table=document.getElementById('nodes'); if(!table){times(); return;}
  var heads=table.tHead.rows[0].cells, state={sort:'',filter:'',open:{}};
  function body(){return table.tBodies[0];}
  function sortBy(key, desc){
    var idx=-1;
    for(var i=0;i<heads.length;i++){heads[i].className='';
      if(heads[i].getAttribute('data-key')===key) idx=i;}
    if(idx<0) return;
    heads[idx].className=desc?'desc':'asc';
    var rows=Array.prototype.slice.call(body().querySelectorAll('tr.node'));
    rows.sort(function(a,b){
      var x=a.cells[idx].getAttribute('data-sort')||a.cells[idx].textContent;
      var y=b.cells[idx].getAttribute('data-sort')||b.cells[idx].textContent;
      var nx=parseFloat(x), ny=parseFloat(y), c;
      if(!isNaN(nx)&&!isNaN(ny)&&String(nx)===x&&String(ny)===y) c=nx-ny;
      else c=x.localeCompare(y);
      return desc?-c:c;});
    rows.forEach(function(r){body().appendChild(r);
      var h=hist(r.getAttribute('data-node')); if(h) body().appendChild(h);});
    state.sort=(desc?'-':'')+key; table.setAttribute('data-sorted', state.sort);
  }
  function filter(){var f=state.filter.toLowerCase(), rows=body().querySelectorAll('tr.node'), shown=0;
    for(var i=0;i<rows.length;i++){var hit=!f||rows[i].textContent.toLowerCase().indexOf(f)>=0;
      rows[i].style.display=hit?'':'none'; if(hit) shown++;
      var h=hist(rows[i].getAttribute('data-node')); if(h) h.style.display=hit?'':'none';}
    table.setAttribute('data-shown', shown);}
  function hist(id){return body().querySelector('tr.hist[data-for="'+CSS.escape(id)+'"]');}
  function reopen(){var rows=body().querySelectorAll('tr.hist');
    for(var i=0;i<rows.length;i++) rows[i].hidden=!state.open[rows[i].getAttribute('data-for')];}
  function save(){var parts=[];
    if(state.sort) parts.push('sort='+state.sort);
    if(state.filter) parts.push('filter='+encodeURIComponent(state.filter));
    var o=Object.keys(state.open); if(o.length) parts.push('open='+o.map(encodeURIComponent).join(','));
    history.replaceState(null,'',parts.length?'#'+parts.join('&'):location.pathname);}
  function apply(){times(); reopen(); if(state.sort) sortBy(state.sort.replace(/^-/,''), state.sort[0]==='-');
    filter();}
  for(var i=0;i<heads.length;i++){(function(h){h.addEventListener('click',function(){
    var key=h.getAttribute('data-key'), desc=h.className==='asc';
    sortBy(key, desc); save();});})(heads[i]);}
  var box=document.getElementById('filter');
  box.addEventListener('input',function(){state.filter=box.value; filter(); save();});
  table.addEventListener('click',function(ev){var a=ev.target.closest('a.toggle'); if(!a) return;
    ev.preventDefault(); var id=a.getAttribute('data-node');
    if(state.open[id]) delete state.open[id]; else state.open[id]=1; reopen(); save();});
  var hash=location.hash.replace(/^#/,'').split('&');
  for(var j=0;j<hash.length;j++){var kv=hash[j].split('='), v=decodeURIComponent(kv[1]||'');
    if(kv[0]==='sort') state.sort=v; if(kv[0]==='filter'){state.filter=v; box.value=v;}
    if(kv[0]==='open') v.split(',').forEach(function(n){if(n) state.open[n]=1;});
    if(kv[0]==='refresh') document.body.setAttribute('data-refresh', v);}
  apply();
  var parts=['top','pool','charts','whynot','recent'];
  function refresh(){var x=new XMLHttpRequest(); x.open('GET', location.pathname);
    x.onload=function(){if(x.status!==200) return;
      var doc=new DOMParser().parseFromString(x.responseText,'text/html');
      parts.forEach(function(id){var a=document.getElementById(id), b=doc.getElementById(id);
        if(a&&b) a.innerHTML=b.innerHTML;});
      var nb=doc.getElementById('nodes'); if(nb) body().innerHTML=nb.tBodies[0].innerHTML;
      ref=parseFloat(doc.body.getAttribute('data-now')); loaded=Date.now();
      document.body.setAttribute('data-refreshed', (parseInt(document.body.getAttribute('data-refreshed')||'0')+1));
      apply();};
    x.send();}
  var every=parseFloat(document.body.getAttribute('data-refresh'));
  if(every>0) setInterval(refresh, every*1000);
  setInterval(times, 1000);
})();
"""


def _card(title: str, rows: list[tuple[str, str]], ident: str) -> str:
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows) or \
        "<tr><td>none</td></tr>"
    return f"<div class='card' id='{ident}'><h2>{html.escape(title)}</h2><table>{body}</table></div>"


def _pool(doc: Mapping[str, Any]) -> str:
    """The summary cards: nodes, actions, spend, queue, caps."""
    e = html.escape
    s = doc.get("summary") or {}
    if not s:
        return ""
    cards = [
        _card(f"{s.get('nodes', 0)} nodes by worker state",
              [(e(k), f"<b>{v}</b>") for k, v in s.get("by_worker_state", {}).items()]
              + ([("of them drained by us", f"<b>{s['drained_by_us']}</b>")] if s.get("drained_by_us") else [])
              + ([("created, not listed yet", f"<b>{s['created_unlisted']}</b>")]
                 if s.get("created_unlisted") else []), "by-state"),
        _card("matrix says / planned",
              [(e(k), f"<b>{v}</b>") for k, v in s.get("by_matrix_action", {}).items()]
              + [("planned " + e(k), f"<b>{v}</b>") for k, v in s.get("planned", {}).items()]
              + [(f"boot {b['count']} x {e(b['size'])}", e(b["reason"])) for b in s.get("boots", [])],
              "by-action"),
    ]
    spend = s.get("spend") or {}
    cards.append(f"<div class='card' id='spend'><h2>spend</h2>"
                 f"<div><span class='big' id='spend-hour'>{spend.get('per_hour', 0):.2f}</span>/h now</div>"
                 f"<div><span class='big' id='spend-today'>{spend.get('today', 0):.2f}</span> so far today</div>"
                 + "".join(f"<div class='unsized'>{e(u['node'])}: size {e(u['size'])} no longer configured, "
                           f"counted at {u['per_hour']:g}/h ({e(u['priced_by'])})</div>" for u in spend.get("unsized", []))
                 + "</div>")
    if doc.get("top_spenders_today") is not None:
        cards.append(_card("top spenders today", [(e(r["user"]), f"<b>{r['money']:.2f}</b> ({r['node_hours']:.1f} nh)")
                                                  for r in doc["top_spenders_today"]], "spenders"))
    demand = s.get("demand", {})
    cards.append(_card(f"queue: {demand.get('jobs', 0)} jobs, {demand.get('cpus', 0)} cores",
                       [(f"{q['cpus']} cpus, {q['ram_mb']} MB" + (f", {e(q['size'])}" if q["size"] else ""),
                         f"<b>{q['jobs']}</b> jobs") for q in s.get("queue", [])], "queue"))
    caps = []
    for c in s.get("caps", []):
        limit = "no limit" if c["limit"] is None else f"{c['limit']:g}"
        flag = " <span class='binds'>binds</span>" if c["binds"] else ""
        caps.append((e(c["name"]), f"<span data-cap='{e(c['name'])}'>{c['used']:g} / {limit}</span>{flag}"))
    cards.append(_card("caps and budgets", caps, "caps"))
    return "".join(cards)


def _whynot(doc: Mapping[str, Any]) -> str:
    """The "why not?" list: demand not booted for, and nodes kept by something other than their rule."""
    e = html.escape
    items = [f"<li data-reason='{e(w['reason'])}'><span class='reason'>{e(w['reason'])}</span> "
             f"{e(w['text'])}</li>" for w in doc.get("why_not_demand", [])]
    items += [f"<li data-cloud='{e(c['cloud'])}'><span class='reason'>cloud</span> {e(c['why'])}</li>"
              for c in doc.get("placement", [])]
    routine = 0
    for node in doc.get("nodes", []):
        w = node.get("why_not")
        if not w:
            continue
        if w["reason"] == "matrix":
            routine += 1
            continue
        items.append(f"<li data-reason='{e(w['reason'])}' data-node='{e(node['node_id'])}'>"
                     f"<span class='reason'>{e(w['reason'])}</span> {e(w['text'])}</li>")
    if routine:
        items.append(f"<li>{routine} other node(s) kept because their matrix rule says so "
                     "(see each node's history)</li>")
    if not items:
        s = doc.get("summary") or {}
        jobs, boots = (s.get("demand") or {}).get("jobs", 0), s.get("booting", 0)
        items.append(f"<li>{counted(jobs, 'job')} queued: {counted(boots, 'VM')} booting, nothing is held back</li>"
                     if jobs and boots else "<li>nothing is held back</li>")
    return "<h2>Why not?</h2><ul>" + "".join(items) + "</ul>"


def header_level(doc: Mapping[str, Any]) -> str:
    """The header's colour: ``bad`` (red) when unhealthy or the scheduler refuses us an action
    for lack of rights, ``warn`` (amber) while the controller is frozen or paused, a size is in
    protected mode or behind an open capacity breaker, the last reload was rejected, a state file
    was set aside or a node is paid idle, else ``ok`` (green)."""
    if not doc.get("healthy") or doc.get("no_permission"):
        return "bad"
    if (doc.get("frozen") or doc.get("paused") or doc.get("protected_sizes") or doc.get("capacity_breakers")
            or doc.get("config_error") or doc.get("state_set_aside") or doc.get("paid_idle")):
        return "warn"
    return "ok"


def _top(doc: Mapping[str, Any]) -> str:
    e = html.escape
    parts = []
    parts.append(f"<span class='{header_level(doc)}' id='health'>{e(str(doc.get('health')))}</span>")
    for size, why in sorted((doc.get("protected_sizes") or {}).items()):
        parts.append(f"<span class='warn' data-protected='{e(str(size))}'>size {e(str(size))} "
                     f"{e(str(why))}</span>")  # the words start "protected: ..."
    if doc.get("ha"):
        parts.append(f"<span id='ha'>{e(str(doc['ha']))}</span>")
    if doc.get("config_error"):
        parts.append(f"<span class='warn' id='config-error'>reload rejected, the previous configuration "
                     f"runs: {e(str(doc['config_error']))}</span>")
    if doc.get("state_set_aside"):
        parts.append(f"<span class='warn' id='state-set-aside'>state that could not be read, set aside "
                     f"(look, then remove): {e(', '.join(str(p) for p in doc['state_set_aside']))}</span>")
    for line in doc.get("ha_mismatch") or ():
        parts.append(f"<span class='bad' data-ha-mismatch>{e(str(line))}: a takeover changes what "
                     "is decided</span>")
    if doc.get("paused"):
        parts.append(f"<span class='warn' id='paused'>paused: {e(str(doc['paused']))}</span>")
    if doc.get("frozen"):
        parts.append(f"<span class='warn' id='frozen'>actions frozen: {e(str(doc['frozen']))}</span>")
    if doc.get("scheduler_clock_ahead"):
        parts.append(f"<span class='warn' id='scheduler-clock'>scheduler clock "
                     f"{e(duration(doc['scheduler_clock_ahead']))} ahead of ours: idle nodes reporting "
                     f"an idle-since in the future count from when first seen idle</span>")
    if doc.get("no_permission"):
        parts.append(f"<span class='bad' id='no-permission'>{e(str(doc['no_permission']))}</span>")
    if doc.get("paid_idle"):
        found = doc["paid_idle"]
        cost = sum(p["cost_so_far"] for p in found)
        parts.append(f"<span class='warn' id='paid-idle-count'>{len(found)} node(s) paid idle "
                     f"({cost:.2f} so far)</span>")
    if doc.get("other_controller"):
        parts.append(f"<span class='bad' id='other-controller'>stopped: {e(str(doc['other_controller']))}</span>")
    store = doc.get("store") or {}
    if store.get("problem"):
        parts.append(f"<span class='{'warn' if store.get('ok') else 'bad'}' id='store'>store "
                     f"{e(str(store['name']))}: {e(str(store['problem']))}</span>")
    matrix = doc.get("matrix") or {}
    if matrix.get("error"):
        parts.append(f"<span class='bad'>matrix error (running the last good one): "
                     f"{e(str(matrix['error']))}</span>")
    if matrix.get("sha256"):
        parts.append(f"<span>matrix {e(str(matrix['sha256'])[:12])}</span>")
    for name, poll in sorted((doc.get("polls") or {}).items()):
        parts.append(f"<span>{e(name)} polled {e(duration(poll['age_seconds']))} ago</span>")
    parts.append(at_html(doc.get("now"), str(doc.get("now_text") or ""), "generated"))
    return "".join(parts)


def render_html(doc: Mapping[str, Any]) -> str:
    """The console page (see the module docstring) for one :func:`~nodemanager.console.status_document.status_document`."""
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width'>",
             "<title>nodemanager status</title><style>", _CSS, CHART_CSS, "</style></head>",
             f"<body data-now='{doc.get('now') or 0:.3f}' data-refresh='{REFRESH_SECONDS}'>",
             "<h1>nodemanager</h1><div class='summary' id='top'>", _top(doc), "</div>",
             f"<div id='pool'>{_pool(doc)}</div>", charts_html(doc)]
    if doc.get("paid_idle"):
        parts.append("<h2>Paid idle</h2><ul id='paid-idle'>" + "".join(
            f"<li data-node='{e(str(p['node_id']))}'>{e(str(p['text']))}</li>" for p in doc["paid_idle"])
            + "</ul>")
    if doc.get("notes"):
        parts.append("<ul id='notes'>" + "".join(f"<li>{e(str(n))}</li>" for n in doc["notes"])
                     + "</ul>")
    if doc.get("spot_markets"):
        parts.append("<ul id='spot'>" + "".join(
            f"<li>spot size {e(k)}: {e(v['why'])}; takes jobs of up to "
            f"{e(duration(v['takes_walltime_up_to'])) if v['takes_walltime_up_to'] is not None else 'any'} walltime</li>"
            for k, v in sorted(doc["spot_markets"].items())) + "</ul>")
    parts.append(limits_html(doc))
    counters = doc.get("counters") or {}
    if counters:
        parts.append("<div class='summary' id='counters'>" + "".join(
            f"<span>{e(str(k))}: {e(str(v))}</span>" for k, v in sorted(counters.items()))
            + "</div>")
    parts.append(f"<div id='whynot'>{_whynot(doc)}</div>")
    parts.append(nodes_html(doc))
    workers = doc.get("unpaired_workers") or []
    if workers:
        parts.append("<h2>Workers without a cloud node</h2><ul id='workers'>")
        for w in workers:
            extra = f", draining ({w['drain_reason']})" if w.get("draining") else ""
            parts.append(f"<li>{e(w['name'])}: {e(str(w['state']))}{e(extra)}</li>")
        parts.append("</ul>")
    foreign = doc.get("foreign_vms") or []
    if foreign:
        parts.append("<h2>VMs of another deployment with this cluster name (never touched)</h2>"
                     "<ul id='foreign'>")
        for v in foreign:
            parts.append(f"<li>{e(str(v['name']))} ({e(str(v['node_id']))}, {e(str(v['state']))}): "
                         f"deployment {e(str(v['deployment'] or 'none'))}</li>")
        parts.append("</ul>")
    parts.append(f"<div id='recent'>{recent_html(doc)}</div>")
    parts.append("<script>" + _JS + "</script></body></html>")
    return "".join(parts)


