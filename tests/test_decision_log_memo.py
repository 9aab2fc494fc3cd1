"""The decision log skips a node whose explanation is the very record it logged last: its lines,
history events and the nodes it says left are those of a log given a fresh copy of every record."""

import logging
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from nodemanager.console.decision_log import DecisionLog
from nodemanager.model import ItemKind, NodeExplanation, Plan, PlanItem, Snapshot
from policy_matrix.vocabulary import Action, StateTuple


class _History:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def add(self, node_id, at, kind, text):
        self.events.append((node_id, at, kind, str(text)))

    def gone(self, node_id, at, info=None):
        self.events.append((node_id, at, "gone", info))


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record):
        self.lines.append((record.levelno, record.getMessage()))


def _explanation(i, state="idle", window="open", action=None, blocked=None, rule="m:1"):
    return NodeExplanation(node_id=f"n{i}", name=f"h{i}", size="small",
                           tuple=StateTuple(state, window, "boot ok", "idle ok"), rule=rule,
                           matrix_action=Action.START_DRAIN if action else Action.NONE,
                           action=action, blocked_by=blocked, reason="why")


def _copy(e):
    return e._replace(tuple=replace(e.tuple))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_log_given_the_same_records_says_what_one_given_copies_says(data):
    logger = logging.getLogger("nodemanager.decisions")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        warm, cold = DecisionLog(), DecisionLog()
        warm_history, cold_history = _History(), _History()
        slots = {i: _explanation(i) for i in range(5)}
        for cycle in range(data.draw(st.integers(3, 25), label="cycles")):
            now = 1000.0 + 10 * cycle
            nodes = []
            for i, e in slots.items():
                op = data.draw(st.sampled_from(["same"] * 4 + ["absent", "copy", "state", "action",
                                                              "blocked", "rule", "window"]))
                if op == "absent":
                    continue
                if op == "copy":
                    e = _copy(e)
                elif op == "state":
                    e = e._replace(tuple=replace(e.tuple, worker_state=data.draw(
                        st.sampled_from(["idle", "busy", "down"]))))
                elif op == "action":
                    e = e._replace(action=data.draw(st.sampled_from([None, ItemKind.DRAIN])))
                elif op == "blocked":
                    e = e._replace(blocked_by=data.draw(st.sampled_from([None, "budget"])))
                elif op == "rule":
                    e = e._replace(rule=data.draw(st.sampled_from(["m:1", "m:2"])))
                elif op == "window":
                    e = e._replace(tuple=replace(e.tuple, window=data.draw(st.sampled_from(["open", "closed"]))))
                slots[i] = e
                nodes.append(e)
            items = tuple(PlanItem(kind=ItemKind.DRAIN, node_id=e.node_id, node_name=e.name, reason="r")
                          for e in nodes if data.draw(st.integers(0, 7)) == 0)
            plan = Plan(now=now, items=items, nodes=tuple(nodes))
            copies = Plan(now=now, items=items, nodes=tuple(_copy(e) for e in nodes))
            snap = Snapshot(now=now, polled_at={})
            handler.lines.clear()
            gone = warm.decisions(plan, False, warm_history, None)
            warm.summary(snap, plan, 0.0, False)
            said = list(handler.lines)
            handler.lines.clear()
            assert cold.decisions(copies, False, cold_history, None) == gone
            cold.summary(snap, copies, 0.0, False)
            assert handler.lines == said
            assert warm_history.events == cold_history.events
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_node_whose_decision_changes_is_logged_again_and_one_that_left_is_said_to_have_left(caplog):
    caplog.set_level(logging.INFO, "nodemanager.decisions")
    log = DecisionLog()
    a, b = _explanation(1), _explanation(2)
    for k in range(3):
        log.decisions(Plan(now=float(k), nodes=(a, b)), False, None, None)
    assert [r.getMessage()[:7] for r in caplog.records] == ["node h1", "node h2"]   # first seen only
    caplog.clear()
    busy = a._replace(tuple=replace(a.tuple, worker_state="busy"))
    assert log.decisions(Plan(now=3.0, nodes=(busy,)), False, None, None) == ["n2"]
    assert [r.getMessage() for r in caplog.records] == [
        "node h1 -> none: why; (busy, open, boot ok, idle ok), rule m:1 says None", "node n2 left the cloud listing"]
    caplog.clear()
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    closed = busy._replace(tuple=replace(busy.tuple, window="closed"))   # the same decision: DEBUG
    log.decisions(Plan(now=4.0, nodes=(closed,)), False, None, None)
    assert [(r.levelno, r.getMessage()[:45]) for r in caplog.records][:1] == [
        (logging.DEBUG, "node h1 -> none: why; (busy, closed, boot ok,")]


def test_the_summary_line_counts_nodes_per_worker_state_and_repeats_at_debug(caplog):
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    log = DecisionLog()
    nodes = (_explanation(1), _explanation(2, state="busy"), _explanation(3))
    snap = Snapshot(now=0.0, polled_at={})
    for k in range(2):
        log.summary(snap, Plan(now=float(k), nodes=nodes), 0.25, False)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (level, "cycle: 0 nodes (busy 1, idle 2), 0 workers, 0 queued, 0 action(s), 0 boot(s), 0.250s CPU")
        for level in (logging.INFO, logging.DEBUG)]
