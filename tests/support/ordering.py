"""The order in which the suite's tests reach xdist's work-stealing workers: the longest first.

``make test`` runs ``pytest -n 4 --dist worksteal``. xdist's work stealing gives each of the N
workers one slice of the collection in order (``len(pending) // workers_left`` tests each, as
``WorkStealingScheduling.check_schedule`` deals them) and lets an idle worker take the back half
of the longest queue left. A module of a minute or two (a whole ``fleet up`` walkthrough, a
thousand jobs end to end) that sits late in its slice starts late and ends the run on one worker
while the others wait: the run's tail.

:func:`longest_first` deals the modules of :data:`MODULE_SECONDS` to the heads of the slices,
heaviest first to the slice with the least so far (longest processing time first), each module's
tests kept together and in their order (a module-scoped fixture, such as a shared ``fleet up``,
starts once); every other test keeps its order behind them. The figures are each module's
seconds in a full run on the 2-core machine (2026-11-29); a stale figure costs balance, never a
result, and a module missing from the table just keeps its place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

__all__ = ["MODULE_SECONDS", "longest_first", "slice_sizes"]

T = TypeVar("T")

#: Seconds of each of the longest modules (setup, call and teardown of its tests summed).
MODULE_SECONDS: Final[Mapping[str, float]] = {
    "tests/fleet/dispatch/test_end_to_end.py": 177,
    "tests/fleet/local/test_up_kinds.py": 123,
    "tests/fleet/local/test_up.py": 109,
    "tests/fleet/dispatch/test_kinds.py": 100,
    "tests/fleet/local/test_up_members.py": 83,
    "tests/fleet/local/test_preemption_up.py": 82,
    "tests/deploy/test_image.py": 67,
    "tests/fleet/test_sentinel.py": 63,
    "tests/fleet/dispatch/test_slow_member.py": 60,
    "tests/fleet/dispatch/test_deletion.py": 58,
    "tests/fleet/local/test_up_life.py": 57,
    "tests/fleet/dispatch/test_preemption.py": 56,
    "tests/fleet/local/test_up_trainjob.py": 56,
    "tests/fleet/dispatch/test_recovery.py": 51,
    "tests/fleet/local/test_t9k_up.py": 49,
    "tests/fleet/dispatch/test_dispatcher.py": 46,
    "tests/fleet/dispatch/test_refusals.py": 46,
    "tests/queues/test_planner_stateful.py": 44,
    "tests/fleet/dispatch/test_syncer.py": 43,
    "tests/fleet/dispatch/test_copy_lost.py": 40,
    "tests/fleet/dispatch/test_member_reload.py": 39,
    "tests/fleet/dispatch/test_redis_secrets.py": 36,
    "tests/fleet/endpoint/console/test_browser.py": 27,
    "tests/fleet/endpoint/test_durability.py": 26,
    "tests/fleet/dispatch/test_vcjob_and_batch_job.py": 25,
    "tests/fleet/endpoint/test_fuzz.py": 24,
    "tests/fleet/dispatch/test_sharded_syncers.py": 23,
    "tests/fleet/dispatch/test_more_kinds.py": 21,
    "tests/fleet/local/test_up_state.py": 21,
}


def slice_sizes(count: int, workers: int) -> list[int]:
    """How many of ``count`` tests each of ``workers`` gets first, as xdist's work stealing deals
    them (each idle worker in turn: what is left over the workers left, rounded down)."""
    sizes = []
    left = count
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


def longest_first(
    items: Sequence[T],
    module_of: Callable[[T], str],
    workers: int,
    seconds: Mapping[str, float] = MODULE_SECONDS,
) -> list[T]:
    """``items`` reordered so that each worker's first slice begins with its share of the long
    modules of ``seconds`` (see the module docstring); the same items, each once."""
    if workers < 2:
        return list(items)
    groups: dict[str, list[T]] = {}
    rest: list[T] = []
    for item in items:
        module = module_of(item)
        if module in seconds:
            groups.setdefault(module, []).append(item)
        else:
            rest.append(item)
    sizes = slice_sizes(len(items), workers)
    heads: list[list[T]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for module in sorted(groups, key=lambda m: -seconds[m]):
        group = groups[module]
        fitting = [i for i in range(workers) if len(heads[i]) + len(group) <= sizes[i]] or list(
            range(workers)
        )
        target = min(fitting, key=lambda i: load[i])
        heads[target].extend(group)
        load[target] += seconds[module]
    ordered: list[T] = []
    taken = 0
    for i, head in enumerate(heads):
        fill = max(0, sizes[i] - len(head))
        ordered.extend(head)
        ordered.extend(rest[taken : taken + fill])
        taken += fill
    ordered.extend(rest[taken:])
    return ordered
