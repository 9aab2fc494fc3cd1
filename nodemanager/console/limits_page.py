"""The status page's lines on what limits giving back and booting: the ``[Budget NAME]``
sections (active or not, how many nodes each held back), the capacity breakers not closed and
the sizes whose price is overridden."""

from __future__ import annotations

import html
from typing import Any, Mapping

__all__ = ["limits_html"]


def limits_html(doc: Mapping[str, Any]) -> str:
    """``<ul id='budgets'>`` of the budgets, ``<ul id='breakers'>`` of the open and half-open
    capacity breakers and ``<ul id='prices'>`` of the overridden prices (each left out when empty)."""
    e = html.escape
    items = []
    for b in doc.get("budgets") or ():
        state = (f"active: {b['allowed']} at once, {b['held']} node(s) held back" if b["active"]
                 else "outside its schedule")
        items.append(f"<li>{e(str(b['text']))}: {e(state)}</li>")
    out = "<ul id='budgets'>" + "".join(items) + "</ul>" if items else ""
    breakers = [f"<li>size {e(str(size))}: {e(str(why))}</li>"
                for size, why in sorted((doc.get("capacity_breakers") or {}).items())]
    out += "<ul id='breakers'>" + "".join(breakers) + "</ul>" if breakers else ""
    prices = [f"<li>size {e(str(p['size']))}: {p['price']:g}/h as decisions and spend count it "
              f"(configured price {p['list_price']:g}/h, price_override and licence_price applied)</li>"
              for p in doc.get("price_overrides") or ()]
    return out + ("<ul id='prices'>" + "".join(prices) + "</ul>" if prices else "")
