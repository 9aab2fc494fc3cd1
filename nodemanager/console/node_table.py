"""The console's node table: one row per node with its tuple, rule, plan and next change, each
opening the node's history, and the table of nodes recently gone; times as elements the page's
script shows in the browser's local zone."""

from __future__ import annotations

import html
import time
from typing import Any, Mapping

from nodemanager.text import duration, short_rule

__all__ = ["NODE_COLUMNS", "nodes_html", "recent_html", "at_html"]


# what an empty cell of a column says (otherwise a dash)
EMPTY_CELL = {"matrix_action": "None", "planned_action": "none", "raw_state": "no worker",
              "worker": "none"}


# (JSON key, column header) of the node table, in display order.
NODE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "node"), ("size", "size"), ("worker", "worker"), ("raw_state", "scheduler state"),
    ("tuple_text", "tuple"), ("rule", "matrix rule"), ("matrix_action", "matrix says"),
    ("planned_action", "planned"), ("blocked_by", "blocked by"), ("why", "why"),
    ("next_change_text", "next change"), ("last_outcome", "last outcome"),
)


def at_html(at: float | None, fallback: str, what: str = "", tag: str = "span", cls: str = "") -> str:
    """An element the script shows in local time (``fallback``, the server's text, until then)."""
    e = html.escape
    if at is None:
        return f"<{tag}{cls}>{e(fallback)}</{tag}>"
    return (f"<{tag}{cls} data-at='{at:.0f}'" + (f" data-what='{e(what)}'" if what else "")
            + f">{e(fallback)}</{tag}>")


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _events(node: Mapping[str, Any]) -> str:
    """A node's why-not sentence and its events, latest first."""
    e = html.escape
    events = node.get("events") or []
    why = node.get("why_not")
    lines = [f"<li>{at_html(ev['at'], _utc(ev['at']))} <span class='ev-{e(ev['kind'])}'>"
             f"{e(ev['kind'])}</span> {e(ev['text'])}</li>" for ev in reversed(events)]
    head = f"<div><b>why not:</b> {e(why['text'])}</div>" if why else ""
    return f"{head}<ol>{''.join(lines) or '<li>no events recorded</li>'}</ol>"


def _row(node: Mapping[str, Any]) -> str:
    e = html.escape
    cls = "planned" if node.get("planned_action") else "blocked" if node.get("blocked_by") else ""
    cells = [f"<tr class='node {cls}' data-node='{e(node['node_id'])}'>"]
    for key, _ in NODE_COLUMNS:
        value = node.get(key)
        text = EMPTY_CELL.get(key, "-") if value is None or value == "" else str(value)
        if key == "name" and node.get("held"):
            text += " (held)"
        if key == "blocked_by" and node.get("budget"):
            text += f" {node['budget']}"  # the [Budget NAME] that holds it back
        if key == "why" and node.get("operator_reason"):
            text += f" (operator's reason: {node['operator_reason']})"
        if key == "planned_action" and node.get("in_flight"):
            f = node["in_flight"]
            text = (text + " " if value else "") + f"[{f['action']} under way {duration(f['for_seconds'])}]"
        if key == "next_change_text" and node.get("next_change") is not None:
            cells.append(at_html(node["next_change"], text, node.get("next_change_what") or "changes",
                             "td", " class='next'"))
            continue
        attrs = ""
        if key == "tuple_text" and node.get("beside"):
            # the matrix's words first, what else is known beside them (muted)
            cells.append(f"<td class='tuple'>{e(str(node['matrix_tuple_text']))} "
                         f"<span class='beside'>{e(', '.join(node['beside']))}</span></td>")
            continue
        if key == "rule" and value:
            attrs = f" title='{e(text)}'"
            text = short_rule(text)
        cells.append(f"<td class='{key.split('_')[0]}'{attrs}>{e(text)}</td>")
    events = node.get("events") or ()
    cells.append(f"<td class='history' data-sort='{len(events)}'><a href='#' class='toggle' "
                 f"data-node='{e(node['node_id'])}'>{len(events)} event(s)</a></td></tr>")
    cells.append(f"<tr class='hist' data-for='{e(node['node_id'])}' hidden>"
                 f"<td colspan='{len(NODE_COLUMNS) + 1}'>{_events(node)}</td></tr>")
    return "".join(cells)


def recent_html(doc: Mapping[str, Any]) -> str:
    e = html.escape
    recent = doc.get("recent") or []
    if not recent:
        return ""
    rows = "".join(
        f"<tr data-node='{e(r['node_id'])}'><td>{e(str(r.get('name') or r['node_id']))}</td>"
        f"<td>{e(str(r.get('size') or ''))}</td>{at_html(r['gone_at'], _utc(r['gone_at']), 'gone', 'td')}"
        f"<td><details><summary>{len(r['events'])} event(s)</summary>{_events({**r, 'why_not': None})}"
        "</details></td></tr>" for r in recent)
    return ("<h2>Recently gone (last hour)</h2><table><thead><tr><th>node</th><th>size</th>"
            f"<th>left the listing</th><th>history</th></tr></thead><tbody>{rows}</tbody></table>")


def nodes_html(doc: Mapping[str, Any]) -> str:
    """The node table with its filter box; each row's history opens beneath it."""
    e = html.escape
    parts = ["<div class='controls'><label>filter nodes: <input id='filter' type='search' "
             "placeholder='name, state, rule, reason...'></label></div>",
             "<table id='nodes'><thead><tr>"]
    for key, title in NODE_COLUMNS:
        parts.append(f"<th data-key='{key}'>{e(title)}</th>")
    parts.append("<th data-key='events'>history</th></tr></thead><tbody>")
    for node in doc.get("nodes", []):
        parts.append(_row(node))
    parts.append("</tbody></table>")
    return "".join(parts)
