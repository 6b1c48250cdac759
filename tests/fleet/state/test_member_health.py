"""The member health record: its transition rule and its wire form."""

from __future__ import annotations

import json

from fleet.state.member_health import MemberHealth, health_items, parse

THRESHOLDS = {"failure_threshold": 3, "success_threshold": 2}


def _probe(record: MemberHealth, healthy: bool, now: float) -> tuple[MemberHealth, bool]:
    return record.after_probe(
        healthy=healthy, error=None if healthy else "refused", latency=0.01, now=now, **THRESHOLDS
    )


def test_the_first_probe_decides_then_the_thresholds_count() -> None:
    record, turned = _probe(MemberHealth(), True, 100.0)
    assert turned and record.ready is True and record.since == 100.0
    for t in (101.0, 102.0):
        record, turned = _probe(record, False, t)
        assert not turned and record.ready is True and record.since == 100.0
    record, turned = _probe(record, False, 103.0)
    assert turned and record.not_ready and record.since == 103.0 and record.failures == 3
    assert record.error == "refused"
    assert record.not_ready_for(113.0) == 10.0
    record, turned = _probe(record, True, 104.0)
    assert not turned and record.not_ready and record.since == 103.0 and record.failures == 0
    record, turned = _probe(record, True, 105.0)
    assert turned and record.ready is True and record.since == 105.0 and record.error is None
    assert record.not_ready_for(200.0) is None


def test_a_record_read_back_continues_where_it_was() -> None:
    """What a restarted syncer does: the NotReady clock and the failures counted survive."""
    down, _ = _probe(MemberHealth(), False, 50.0)
    again = parse(down.to_json())
    assert again == down
    record, turned = _probe(again, False, 80.0)
    assert not turned and record.since == 50.0 and record.failures == 2
    counting, _ = _probe(MemberHealth(True, 10.0, failures=2), False, 60.0)
    assert counting.not_ready and counting.since == 60.0


def test_unreadable_records_and_fields_are_left_out() -> None:
    assert parse(None) is None
    assert parse(b"not json") is None
    assert parse("[1]") is None
    assert parse(json.dumps({"ready": "yes", "failures": True, "since": 5})) == MemberHealth(since=5)
    assert health_items({b"m-1": MemberHealth(False, 1.0).to_json(), b"m-2": b"{"}) == {
        "m-1": MemberHealth(False, 1.0)
    }
