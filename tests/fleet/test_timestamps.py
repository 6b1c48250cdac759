"""Timestamps read the way kubectl and the Kubernetes API server write them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleet.timestamps import now_rfc3339, parse_rfc3339, rfc3339


def test_a_timestamp_is_utc_to_the_second_with_a_z_as_metav1_time_marshals_it() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert rfc3339(1_700_000_000.999) == "2023-11-14T22:13:20Z"  # truncated, never rounded up


def test_now_is_the_current_second() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = parse_rfc3339(now_rfc3339())
    after = datetime.now(UTC)
    assert stamp is not None and before <= stamp <= after


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-27T14:08:24Z", datetime(2026, 11, 27, 14, 8, 24, tzinfo=UTC)),
        # Another zone, as other writers (an operator, a member's Event) may send it.
        ("2026-11-27T16:08:24+02:00", datetime(2026, 11, 27, 14, 8, 24, tzinfo=UTC)),
        ("2026-11-27T14:08:24.250000Z", datetime(2026, 11, 27, 14, 8, 24, 250000, tzinfo=UTC)),
        ("2026-11-27T14:08:24", datetime(2026, 11, 27, 14, 8, 24, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_a_timestamp_is_read_back_as_the_same_instant(text: str, expected: datetime) -> None:
    then = parse_rfc3339(text)
    assert then is not None and then.tzinfo is not None
    assert then == expected


@pytest.mark.parametrize("text", [None, "", "yesterday", 1700000000, "2026-13-01T00:00:00Z"])
def test_an_absent_or_unreadable_timestamp_reads_as_none(text: object) -> None:
    assert parse_rfc3339(text) is None


def test_what_is_written_reads_back_unchanged() -> None:
    stamp = rfc3339(1_764_252_504)
    then = parse_rfc3339(stamp)
    assert then is not None and rfc3339(then.timestamp()) == stamp
