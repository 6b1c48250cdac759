"""Side by side: one benchmark on two commits, alternately, in one sitting.

    .venv/bin/python -m bench.compare BASE [--head HEAD] [--pairs 3] -- bench.dispatch_bench --jobs 1000
    make bench-compare BASE=ffec8c4 BENCH="bench.dispatch_bench --no-failover" PAIRS=3

A figure measured on this shared two-core machine moves by tens of percent from one hour to the
next, so a before and an after are worth comparing only when run in one sitting, interleaved.
Each commit is checked out once into a worktree of its own (``git worktree add --detach``, in a
temporary directory, removed at the end; ``HEAD`` may also be ``WORKTREE``, the working tree as it
is, uncommitted changes included); the benchmark module then runs with that worktree first on
``PYTHONPATH``, so it and every process it starts import that commit's code (this venv's
dependencies serve both: compare commits whose dependencies agree). Pairs alternate their order
(base, head, then head, base, ...), so a machine that slows down over the sitting weighs on both.

Each run's figures are its last output line (every benchmark in ``bench/`` ends with one JSON
line). For every numeric figure it prints base and head (median, with min-max), the ratio
head/base of the medians, and whether the two ranges overlap (within the spread); it ends with
one JSON line of all of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKTREE = "WORKTREE"


def _worktree(commit: str, into: Path) -> Path:
    """A checkout of ``commit`` (the working tree itself for :data:`WORKTREE`)."""
    if commit == WORKTREE:
        return ROOT
    path = into / commit.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
        check=True,
        capture_output=True,
    )
    return path


def _run(tree: Path, bench: list[str], log: Path) -> dict[str, Any]:
    """One run of ``bench`` (``module args...``) on the code of ``tree``; its JSON figures."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with log.open("w") as out:
        command = [sys.executable, "-m", *bench]
        done = subprocess.run(command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        tail = "\n".join(lines[-25:])  # the log goes with the scratch directory
        what = f"{' '.join(bench)} failed on {tree} (exit {done.returncode})"
        raise SystemExit(f"{what}; its output ends:\n{tail}")
    figures: dict[str, Any] = json.loads(lines[-1])
    figures.setdefault("wall_seconds", round(time.monotonic() - started, 1))
    return figures


def _numbers(figures: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric figure, nested ones named ``outer.inner``, those of a list of runs (one per
    member count in ``bench.scale_bench``) ``outer.0.inner``."""
    out: dict[str, float] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(_numbers(value, f"{name}."))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    out.update(_numbers(item, f"{name}.{i}."))
    return out


def summarise(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per figure: each side's median, min and max, the ratio of the medians, and whether the
    ranges overlap."""
    a = [_numbers(f) for f in base]
    b = [_numbers(f) for f in head]
    names = sorted(set().union(*a, *b)) if a and b else []
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        xs = [f[name] for f in a if name in f]
        ys = [f[name] for f in b if name in f]
        if not xs or not ys:
            continue
        mx, my = statistics.median(xs), statistics.median(ys)
        out[name] = {
            "base": mx,
            "base_range": [min(xs), max(xs)],
            "head": my,
            "head_range": [min(ys), max(ys)],
            "ratio": round(my / mx, 3) if mx else None,
            "within_spread": min(ys) <= max(xs) and min(xs) <= max(ys),
        }
    return out


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The runner's own options, and the benchmark command after ``--`` (as the Makefile passes
    them: ``BASE --head HEAD --pairs N -- bench.module args...``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="The commit to compare against.")
    parser.add_argument("--head", default=WORKTREE, help="The commit compared (default: the working tree).")
    parser.add_argument("--pairs", type=int, default=3, help="Runs on each side, interleaved.")
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    bench = argv[split + 1 :]
    if not bench:
        parser.error("name the benchmark after --, for example: -- bench.dispatch_bench --jobs 1000")
    return args, bench


def main() -> None:
    args, bench = parse(sys.argv[1:])
    scratch = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    trees = {side: _worktree(commit, scratch) for side, commit in (("base", args.base), ("head", args.head))}
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
    try:
        for pair in range(args.pairs):
            order = ("base", "head") if pair % 2 == 0 else ("head", "base")
            for side in order:
                figures = _run(trees[side], bench, scratch / f"{side}-{pair}.log")
                runs[side].append(figures)
                print(f"pair {pair + 1}, {side}: {json.dumps(figures)}", flush=True)
    finally:
        for tree in trees.values():
            if tree != ROOT:
                remove = ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)]
                subprocess.run(remove, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    summary = summarise(runs["base"], runs["head"])
    width = max((len(n) for n in summary), default=10)
    columns = f"{'base (median, min-max)':>30}  {'head (median, min-max)':>30}"
    print(f"\n{'figure':<{width}}  {columns}  ratio")
    for name, row in summary.items():
        base = f"{row['base']:g} ({row['base_range'][0]:g}-{row['base_range'][1]:g})"
        head = f"{row['head']:g} ({row['head_range'][0]:g}-{row['head_range'][1]:g})"
        mark = "" if row["within_spread"] else "  *"
        print(f"{name:<{width}}  {base:>30}  {head:>30}  {row['ratio']}{mark}")
    print("(* the ranges do not overlap)")
    result = {"base": args.base, "head": args.head, "bench": bench, "runs": runs, "summary": summary}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
