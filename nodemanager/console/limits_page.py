"""The status page's lines on what limits giving back and booting: the ``[Budget NAME]``
sections (active or not, how many nodes each held back)."""

from __future__ import annotations

import html
from typing import Any, Mapping

__all__ = ["limits_html"]


def limits_html(doc: Mapping[str, Any]) -> str:
    """An ``<ul id='budgets'>`` of the budgets (empty when none is configured)."""
    e = html.escape
    items = []
    for b in doc.get("budgets") or ():
        state = (f"active: {b['allowed']} at once, {b['held']} node(s) held back" if b["active"]
                 else "outside its schedule")
        items.append(f"<li>{e(str(b['text']))}: {e(state)}</li>")
    return "<ul id='budgets'>" + "".join(items) + "</ul>" if items else ""
