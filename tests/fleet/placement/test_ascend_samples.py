"""Every Ascend sample in ``config/samples/ascend/`` does what ``expected.yaml`` there says.

The samples are AscendJobs written the way MindCluster's own samples are (one per hardware family
and schedule policy, single and multi node); ``fleet.yaml`` there is the fleet they are judged
on. For each: the exact refusal at submission, or the kubectl Warnings it is accepted with and
either the member, replica types and nodes Fleet places it on (pack among the members where it
fits) or every member's exact pending reason. The member simulator's own scheduler, which shares
none of Fleet's placement code, must agree: it binds the member copy where Fleet placed it (the
same nodes when the job's pods are alike), and binds it nowhere when Fleet says it waits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.placement import MemberCapacity, explain_members, fit_member
from fleet.placement.fit import choose, groups_of
from fleet.sim.jobs import build_pods
from fleet.sim.scheduler import schedule
from fleet.sim.topology import load_topology, node_objects
from fleet.workloads import ascendjob

FOLDER = Path(__file__).resolve().parents[3] / "config" / "samples" / "ascend"
EXPECTED: list[dict[str, Any]] = yaml.safe_load((FOLDER / "expected.yaml").read_text())
NODES = {m.name: node_objects(m) for m in load_topology(FOLDER / "fleet.yaml").members}


def job_of(path: Path) -> dict[str, Any]:
    """The AscendJob of a sample file (alone, or beside the ConfigMaps, Secrets and Services it
    references: ``kubectl apply -f`` takes the whole file)."""
    return next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "AscendJob")


def test_every_sample_has_an_expectation() -> None:
    samples = {p.name for p in FOLDER.glob("*.yaml")} - {"fleet.yaml", "expected.yaml"}
    assert samples == {e["file"] for e in EXPECTED}


@pytest.mark.parametrize("case", EXPECTED, ids=[e["file"] for e in EXPECTED])
def test_sample(case: dict[str, Any]) -> None:
    obj = job_of(FOLDER / case["file"])
    errors = [f"{e.path}: {e.message}" for e in ascendjob.validate(obj)]
    if "refused" in case:
        assert errors == case["refused"]
        return
    assert errors == []
    demand = ascendjob.demand(obj)
    assert list(demand.hardware.warnings) == case.get("warnings", [])
    caps = {name: MemberCapacity.from_lists(name, nodes) for name, nodes in NODES.items()}
    fits = {name: p for name, cap in caps.items() if (p := fit_member(cap, demand)) is not None}
    chosen = choose((name, p.npus_left) for name, p in fits.items())
    copy = ascendjob.member_copy(obj, "uid", 1)
    judged = {name: schedule(nodes, [], build_pods(copy)) for name, nodes in NODES.items()}
    if "pending" in case:
        assert chosen is None
        assert explain_members(caps.values(), demand) == case["pending"]
        assert not any(result.fits for result in judged.values()), "the simulator binds it"
        return
    assert chosen is not None and chosen == case["member"]
    placement = fits[chosen]
    assert [f"{rtype} x{n} on {node}" for node, rtype, n in placement.rows] == case["pods"]
    # Fleet fits exactly where the simulator binds, member by member.
    assert {name for name, result in judged.items() if result.fits} == set(fits)
    bound = judged[chosen]
    if len(groups_of(demand)) == 1:
        assert sorted(bound.bindings.values()) == sorted(n for n, _, k in placement.rows for _ in range(k))
