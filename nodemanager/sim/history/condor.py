"""HTCondor's job history as ``condor_history`` prints it, read as the replay's jobs.

Either ``-json`` (the ads as one JSON array, each ad from a ``{`` line to a ``}`` line, as
``condor_history`` prints them; or one ad per line)::

    condor_history -json -completedsince $(date -d '2026-11-01' +%s) > history.json

or ``-af`` with the attributes of :data:`AF_ATTRS`, in that order::

    condor_history -completedsince $(date -d '2026-11-01' +%s) -af ClusterId ProcId QDate \\
        JobStartDate JobCurrentStartDate CompletionDate EnteredCurrentStatus JobStatus RequestCpus \\
        RequestMemory RequestGpus Owner AcctGroup AllowedJobDuration Cmd > history.txt

The rules for each kind of record are in docs/simulator.md, "Replaying your own history".
"""

from __future__ import annotations

import json
import math
from typing import Any

from nodemanager.sim.history.lines import HistoryLog, Record, Skip, check_range, lines_with_holes

__all__ = ["AF_ATTRS", "read_condor"]

AF_ATTRS = ("ClusterId", "ProcId", "QDate", "JobStartDate", "JobCurrentStartDate", "CompletionDate",
            "EnteredCurrentStatus", "JobStatus", "RequestCpus", "RequestMemory", "RequestGpus", "Owner",
            "AcctGroup", "AllowedJobDuration", "Cmd")
_COMPLETED, _REMOVED, _RUNNING = 4, 3, 2


def read_condor(path: str, log: HistoryLog) -> list[Record]:
    """Every replayable ad of ``path`` (JSON or ``-af``); the others are counted in ``log``."""
    out: list[Record] = []
    ad_lines: list[str] = []
    ad_start = 0
    broken = False
    json_mode: bool | None = None
    for lineno, text in lines_with_holes(path, log):
        if text is None:
            broken = broken or bool(ad_lines)
            continue
        if json_mode is None:
            json_mode = text.lstrip()[0] in "[{"
        if not json_mode:
            _one(out, log, lineno, lambda: _af(text.strip()))
            continue
        if ad_lines:
            ad_lines.append(text)
            if text in ("}", "},"):
                if broken:
                    log.records += 1
                    log.skip("an ad with a skipped line", ad_start)
                else:
                    body = "\n".join(ad_lines).rstrip(",")
                    _one(out, log, ad_start, lambda: _ad(_json(body)))
                ad_lines, broken = [], False
            elif text == "{":
                log.records += 1
                log.skip("an ad that never ends", ad_start)
                ad_lines, ad_start = [text], lineno
            continue
        text = text.strip()
        if text in ("[", "]", ",", "[]"):
            continue
        if text == "{":
            ad_lines, ad_start, broken = [text], lineno, False
        elif text.startswith("{"):
            _one(out, log, lineno, lambda: _ad(_json(text.rstrip(","))))
        else:
            log.records += 1
            log.skip("not part of a JSON ad", lineno)
    if ad_lines:
        log.records += 1
        log.skip("an ad that never ends", ad_start)
    return out


def _one(out: list[Record], log: HistoryLog, lineno: int, read: Any) -> None:
    log.records += 1
    try:
        out.append(check_range(read(), log))
    except Skip as why:
        log.skip(str(why), lineno)


def _json(text: str) -> dict[str, Any]:
    try:
        ad = json.loads(text, parse_constant=lambda c: math.nan)
    except ValueError:
        raise Skip("not valid JSON") from None
    if not isinstance(ad, dict):
        raise Skip("not a JSON object")
    return ad


def _af(text: str) -> Record:
    parts = text.split(" ", len(AF_ATTRS) - 1)
    if len(parts) != len(AF_ATTRS):
        raise Skip(f"not {len(AF_ATTRS)} attributes (condor_history -af, docs/simulator.md)")
    ad: dict[str, Any] = {}
    for name, value in zip(AF_ATTRS, parts):
        if value == "undefined":
            continue
        try:
            ad[name] = float(value) if name not in ("Owner", "AcctGroup", "Cmd") else value
        except ValueError:
            raise Skip(f"bad {name}") from None
    return _ad(ad)


def _number(ad: dict[str, Any], name: str, default: float | None = None) -> float:
    value = ad.get(name, default)
    if value is None:
        raise Skip(f"no {name}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Skip(f"{name} is not a number")
    if not math.isfinite(value):
        raise Skip(f"{name} is not a finite number")
    return float(value)


def _ad(ad: dict[str, Any]) -> Record:
    status = int(_number(ad, "JobStatus"))
    start = _number(ad, "JobCurrentStartDate", 0) or _number(ad, "JobStartDate", 0)
    if start <= 0:
        raise Skip("never started")
    if status == _COMPLETED:
        end = _number(ad, "CompletionDate")
    elif status == _REMOVED:
        end = _number(ad, "CompletionDate", 0) or _number(ad, "EnteredCurrentStatus")
    elif status == _RUNNING:
        raise Skip("still running (no end time)")
    else:
        raise Skip(f"JobStatus {status}: neither completed nor removed")
    limit = _number(ad, "AllowedJobDuration", -1)
    if limit == -1 and "MaxWallTimeMins" in ad:
        limit = _number(ad, "MaxWallTimeMins") * 60
    return Record(submit=_number(ad, "QDate"), start=start, end=end,
                  cores=int(_number(ad, "RequestCpus", 1)), mem_mb=int(math.ceil(_number(ad, "RequestMemory", 0))),
                  gpus=int(_number(ad, "RequestGpus", 0)), limit=limit if limit > 0 else -1.0,
                  user=str(ad.get("Owner") or ""), group=str(ad.get("AcctGroup") or ad.get("AccountingGroup") or ""),
                  name=str(ad.get("Cmd") or ""))
