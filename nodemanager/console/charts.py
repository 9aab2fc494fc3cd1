"""The status page's charts of the last hours (nodes by state, queued cores, spend per hour) as
inline SVG drawn here, from ``/status.json``'s ``trend``: no script, no library, nothing fetched
(the page works offline on a head node). Each value is drawn as a step over the minute it ends."""

from __future__ import annotations

import html
import math
from typing import Any, Mapping, Sequence

from nodemanager.console.trend import STATES
from nodemanager.text import duration

__all__ = ["charts_html", "CHART_CSS", "CHART_WIDTH", "CHART_HEIGHT"]

CHART_WIDTH, CHART_HEIGHT = 400, 150      # pixels: three fit 1,400 px, two 900 px
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 10, 10, 22   # the plot's margins (axis labels)
COLOURS = {"busy": "#2b6cb0", "idle": "#dd8a00", "booting": "#8d8d8d", "down": "#c53030",
           "queued_cores": "#6b46c1", "spend_per_hour": "#2f855a"}

CHART_CSS = """
#charts{display:flex;flex-wrap:wrap;gap:.8em;margin:.6em 0}
#charts figure{margin:0;border:1px solid #ccc;border-radius:4px;padding:.3em .5em .4em}
#charts figcaption{font-size:.9em;color:#333;margin-bottom:.2em}
#charts figcaption b{color:#000} #charts .legend{font-size:.8em;color:#333}
#charts .legend span{display:inline-block;width:.8em;height:.8em;margin:0 .25em 0 .7em;vertical-align:-1px}
#charts svg text{font:11px sans-serif;fill:#444}
"""


def _nice(top: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``top`` (the y axis's top)."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= top - 1e-9)


def _number(value: float) -> str:
    return f"{value:.2f}" if value < 10 and value != int(value) else f"{value:g}"


class _Frame:
    """The plot area: time along x (the points' span), 0..``top`` along y."""

    def __init__(self, points: Sequence[Mapping[str, Any]], top: float) -> None:
        self.t0, self.t1 = points[0]["at"], points[-1]["at"]
        self.top = top
        self.w, self.h = CHART_WIDTH - _LEFT - _RIGHT, CHART_HEIGHT - _TOP - _BOTTOM

    def x(self, at: float) -> float:
        return _LEFT + self.w * (at - self.t0) / max(self.t1 - self.t0, 1e-9)

    def y(self, value: float) -> float:
        return _TOP + self.h * (1 - value / self.top)

    def axes(self, unit: str) -> str:
        """Grid lines at the top and half of the y axis, their values, and the time span below."""
        half, base = self.y(self.top / 2), self.y(0)
        return (f"<line x1='{_LEFT}' y1='{_TOP}' x2='{_LEFT + self.w}' y2='{_TOP}' stroke='#ddd'/>"
                f"<line x1='{_LEFT}' y1='{half:.1f}' x2='{_LEFT + self.w}' y2='{half:.1f}' stroke='#eee'/>"
                f"<line x1='{_LEFT}' y1='{base:.1f}' x2='{_LEFT + self.w}' y2='{base:.1f}' stroke='#999'/>"
                f"<text x='{_LEFT - 4}' y='{_TOP + 4}' text-anchor='end'>{_number(self.top)}{unit}</text>"
                f"<text x='{_LEFT - 4}' y='{half + 4:.1f}' text-anchor='end'>{_number(self.top / 2)}{unit}</text>"
                f"<text x='{_LEFT - 4}' y='{base + 4:.1f}' text-anchor='end'>0</text>"
                f"<text x='{_LEFT}' y='{CHART_HEIGHT - 6}'>{duration(self.t1 - self.t0)} ago</text>"
                f"<text x='{_LEFT + self.w}' y='{CHART_HEIGHT - 6}' text-anchor='end'>now</text>")

    def steps(self, points: Sequence[Mapping[str, Any]], values: Sequence[float]) -> list[tuple[float, float]]:
        """The corners of a step line through ``values``: each point's value is the state at the
        end of its minute, drawn over the minute before it (so the latest shows up to "now")."""
        out: list[tuple[float, float]] = []
        for p, v in zip(points, values):
            x, y = self.x(p["at"]), self.y(v)
            if out:
                out.append((out[-1][0], y))
            out.append((x, y))
        return out


def _polygon(upper: list[tuple[float, float]], lower: list[tuple[float, float]], colour: str) -> str:
    """The band between two step lines, filled (no outline: a band of no height draws nothing)."""
    corners = upper + lower[::-1]
    return (f"<polygon fill='{colour}' fill-opacity='.8' stroke='none' points='"
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in corners) + "'/>")


def _svg(title: str, body: str) -> str:
    return (f"<svg width='{CHART_WIDTH}' height='{CHART_HEIGHT}' viewBox='0 0 {CHART_WIDTH} {CHART_HEIGHT}' "
            f"role='img' aria-label='{html.escape(title)}' xmlns='http://www.w3.org/2000/svg'>{body}</svg>")


def _nodes(points: Sequence[Mapping[str, Any]]) -> str:
    """Nodes by state, stacked (busy at the bottom)."""
    totals = [sum(p[s] for s in STATES) for p in points]
    frame = _Frame(points, _nice(max(totals)))
    body, below = [frame.axes("")], [0.0] * len(points)
    for state in STATES:
        above = [b + p[state] for b, p in zip(below, points)]
        if any(p[state] for p in points):
            body.append(_polygon(frame.steps(points, above), frame.steps(points, below), COLOURS[state]))
        below = above
    last = points[-1]
    legend = "".join(f"<span style='background:{COLOURS[s]}'></span>{s} {last[s]}" for s in STATES)
    return (f"<figure class='chart' id='chart-nodes'><figcaption>nodes by state, now <b>{totals[-1]}</b>"
            f"</figcaption>{_svg('nodes by state over the last hours', ''.join(body))}"
            f"<div class='legend'>{legend}</div></figure>")


def _single(points: Sequence[Mapping[str, Any]], key: str, title: str, unit: str, now_text: str) -> str:
    values = [float(p[key]) for p in points]
    frame = _Frame(points, _nice(max(values)))
    line = frame.steps(points, values)
    base = [(x, frame.y(0)) for x, _ in line]
    body = frame.axes(unit) + _polygon(line, base, COLOURS[key])
    ident = key.replace("_", "-")
    return (f"<figure class='chart' id='chart-{ident}'><figcaption>{html.escape(title)}, now <b>{now_text}</b>"
            f"</figcaption>{_svg(title + ' over the last hours', body)}</figure>")


def charts_html(doc: Mapping[str, Any]) -> str:
    """The charts' block of the page (an explanation instead while fewer than two points)."""
    points = doc.get("trend") or []
    if len(points) < 2:
        return ("<div id='charts'><p class='legend'>charts of the last hours "
                "appear after the daemon's first minutes</p></div>")
    last = points[-1]
    return ("<div id='charts'>" + _nodes(points)
            + _single(points, "queued_cores", "cores queued jobs ask for", "", str(last["queued_cores"]))
            + _single(points, "spend_per_hour", "spend per hour", "", f"{last['spend_per_hour']:.2f}/h")
            + "</div>")
