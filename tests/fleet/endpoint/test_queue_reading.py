"""The readers of the Queue and ElasticQuotaTree objects Fleet computes: what a missing field
(an object from another server) reads as."""

from __future__ import annotations

from fleet.kinds import QueueReading, tree_version


def test_a_queue_reads_as_written() -> None:
    queue = QueueReading.of(
        {
            "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}},
            "status": {
                "used": {"cpu": "2"},
                "borrowed": {},
                "lent": {"cpu": "1"},
                "share": "0.50",
                "belowMin": True,
                "admitted": 1,
                "waiting": 3,
                "pending": 3,
            },
        }
    )
    assert (queue.min, queue.max) == ({"cpu": "4"}, {"cpu": "8"})
    assert (queue.used, queue.borrowed, queue.lent) == ({"cpu": "2"}, {}, {"cpu": "1"})
    assert (queue.share, queue.below_min, queue.admitted, queue.waiting) == ("0.50", True, 1, 3)


def test_a_queue_without_fields_reads_as_empty_and_an_old_one_by_pending() -> None:
    empty = QueueReading.of({"spec": "garbage"})
    assert (empty.min, empty.used, empty.borrowed) == ({}, {}, {})
    assert (empty.share, empty.below_min, empty.admitted, empty.waiting) == ("0.00", False, 0, 0)
    assert QueueReading.of({"status": {"pending": 2}}).waiting == 2


def test_a_tree_version_is_zero_without_a_status() -> None:
    assert tree_version(None) == 0
    assert tree_version({"metadata": {}}) == 0
    assert tree_version({"status": []}) == 0
    assert tree_version({"status": {"version": 3}}) == 3
