"""The submission benchmark (bench/submit_bench.py) against a real ``fleet api``: every request it
sends is a submission the API accepts (201), and each phase reports its figures."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.submit_bench import _run

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("replicas", [1, 2])
def test_both_phases_submit_through_the_api_and_every_request_is_accepted(
    tmp_path: Path, replicas: int
) -> None:
    args = argparse.Namespace(
        jobs=40, clients=2, rate=40.0, seconds=0.5, durability="none", replicas=replicas
    )
    figures = _run(args, tmp_path)
    assert figures["closed_failures"] == {} and figures["open_failures"] == {}
    assert figures["accepted_per_s"] > 0
    assert 0 < figures["closed_p50_ms"] <= figures["closed_p99_ms"]
    assert 0 < figures["open_p50_ms"] <= figures["open_p99_ms"] <= figures["open_max_ms"]
    assert set(figures["cpu_ms_per_submission"]) == {"api", "redis", "clients"}
    assert figures["replicas"] == replicas
    assert all(v > 0 for v in figures["cpu_ms_per_submission"].values())
