"""The in-process create benchmark (bench/api_create_bench.py): every submission it sends is
accepted (201) by the fleet endpoint's app, and it reports the CPU they took."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.api_create_bench import _run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_every_submission_is_accepted_and_its_cpu_reported() -> None:
    args = argparse.Namespace(jobs=30, concurrency=2)
    figures = _run(args, ROOT)
    assert figures["jobs"] == 30
    assert figures["cpu_us_per_submission"] > 0 and figures["wall_us_per_submission"] > 0
