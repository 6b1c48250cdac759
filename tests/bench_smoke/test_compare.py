"""The side-by-side runner's arithmetic (bench/compare.py): medians, ranges, ratios, overlap."""

from __future__ import annotations

from typing import Any

from bench.compare import parse, summarise


def test_each_figure_gets_medians_ranges_a_ratio_and_whether_the_ranges_overlap() -> None:
    base: list[dict[str, Any]] = [
        {"rate": 100, "cpu": {"dispatcher": 2.0}},
        {"rate": 120, "cpu": {"dispatcher": 2.2}},
        {"rate": 110},
    ]
    head: list[dict[str, Any]] = [
        {"rate": 200, "cpu": {"dispatcher": 2.1}},
        {"rate": 240, "cpu": {"dispatcher": 2.3}},
    ]
    summary = summarise(base, head)
    assert summary["rate"] == {
        "base": 110,
        "base_range": [100, 120],
        "head": 220,
        "head_range": [200, 240],
        "ratio": 2.0,
        "within_spread": False,
    }
    assert summary["cpu.dispatcher"]["within_spread"] is True
    assert summary["cpu.dispatcher"]["ratio"] == round(2.2 / 2.1, 3)


def test_a_list_of_runs_is_compared_run_by_run() -> None:
    """``bench.scale_bench`` ends with one run per member count under ``runs``."""
    base: list[dict[str, Any]] = [{"runs": [{"members": 10, "rate": 100}, {"members": 100, "rate": 50}]}]
    head: list[dict[str, Any]] = [{"runs": [{"members": 10, "rate": 120}, {"members": 100, "rate": 150}]}]
    summary = summarise(base, head)
    assert summary["runs.0.rate"]["ratio"] == 1.2
    assert summary["runs.1.rate"]["ratio"] == 3.0
    assert summary["runs.1.members"]["ratio"] == 1.0


def test_text_and_flags_are_not_figures_and_a_figure_on_one_side_only_is_left_out() -> None:
    summary = summarise([{"rate": 1, "ok": True, "note": "x"}], [{"rate": 2, "extra": 5}])
    assert set(summary) == {"rate"}


def test_the_makefile_s_arguments_reach_the_runner_and_the_benchmark_apart() -> None:
    args, bench = parse(
        ["aa63878", "--head", "ab2b36a", "--pairs", "2", "--", "bench.dispatch_bench", "--no-failover"]
    )
    assert (args.base, args.head, args.pairs) == ("aa63878", "ab2b36a", 2)
    assert bench == ["bench.dispatch_bench", "--no-failover"]
