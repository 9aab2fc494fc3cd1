"""One node of ``/status.json`` as text (``nodemanager status NODE``) and the "why not?"
sentences (``nodemanager why [NODE]``). Times in this machine's local zone with "in 2m" /
"3m ago"; text from outside is escaped for the terminal."""

from __future__ import annotations

from typing import Any, Mapping

from nodemanager.text import local_when, printable, short_rule

__all__ = ["find_node", "node_text", "why_text"]


def find_node(doc: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The node of ``doc`` the operator means (cloud id, name or worker), else one gone in the
    last hour (with ``"gone": True``), else None."""
    for node in doc.get("nodes") or ():
        if name in (node.get("node_id"), node.get("name"), node.get("worker")):
            return dict(node)
    for node in doc.get("recent") or ():
        if name in (node.get("node_id"), node.get("name")):
            return {**node, "gone": True}
    return None


def _events(node: Mapping[str, Any], now: float) -> list[str]:
    events = node.get("events") or []
    if not events:
        return ["no events recorded"]
    return [f"  {local_when(ev['at'], now)}  {ev['kind']:<8}  {ev['text']}" for ev in reversed(events)]


def node_text(doc: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    """What the daemon decides for ``node`` and why, then its last events (latest first)."""
    now = doc["now"]
    name = node.get("name") or node["node_id"]
    lines = [f"node {name} ({node['node_id']}, {node.get('size') or '-'})"]
    if node.get("gone"):
        lines.append(f"left the cloud listing {local_when(node['gone_at'], now)}")
    else:
        lines += [
            f"worker {node.get('worker') or '-'}, scheduler state {node.get('raw_state') or '-'}",
            f"tuple {node['tuple_text']}",
            f"rule {short_rule(node['rule'])}: matrix says {node['matrix_action']}, planned "
            f"{node.get('planned_action') or 'nothing'}"
            + (f", blocked by {node['blocked_by']}" if node.get("blocked_by") else ""),
            f"why: {node.get('why') or '-'}",
        ]
        if node.get("operator_reason"):
            lines.append(f"operator's reason: {node['operator_reason']}")
        if node.get("why_not"):
            lines.append(f"why not: {node['why_not']['text']}")
        if node.get("next_change") is not None:
            lines.append(f"next change: {node.get('next_change_what') or 'changes'} "
                         f"{local_when(node['next_change'], now)}")
    lines.append("history (latest first):")
    lines += _events(node, now)
    return "\n".join(printable(line) for line in lines)


def why_text(doc: Mapping[str, Any], node: Mapping[str, Any] | None) -> str:
    """With ``node``: its one why-not sentence (or what is being done to it). Without: every
    queued job signature not booted for, then every node kept, each with its bounded reason."""
    if node is not None:
        if node.get("gone"):
            text = f"{node.get('name') or node['node_id']} is gone: it left the cloud listing " \
                   f"{local_when(node['gone_at'], doc['now'])}"
        elif node.get("why_not"):
            text = node["why_not"]["text"]
        else:
            doing = node.get("planned_action") or (node.get("in_flight") or {}).get("action")
            text = f"{node.get('name') or node['node_id']} is being given back: {doing} " \
                   f"({node.get('why') or 'no reason recorded'})"
        return printable(text)
    lines = [f"[{w['reason']}] {w['text']}" for w in doc.get("why_not_demand") or ()]
    lines += [f"[cloud] {c['why']}" for c in doc.get("placement") or ()]
    lines += [f"[{n['why_not']['reason']}] {n['why_not']['text']}"
              for n in doc.get("nodes") or () if n.get("why_not")]
    return "\n".join(printable(line) for line in lines) or "nothing is held back"
