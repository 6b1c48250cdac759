"""Topology files, the kubeconfig the simulator writes, and the ``fleet sim`` command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleet.cli import main
from fleet.sim.kubeconfig import KubeconfigError, build_kubeconfig, control_endpoint, write_atomically
from fleet.sim.topology import TopologyError, load_topology, node_objects


def test_the_default_topology_has_three_members_and_the_sample_jobs_nodes() -> None:
    topology = load_topology()
    assert [m.name for m in topology.members] == ["member-1", "member-2", "member-3"]
    cards = node_objects(topology.member("member-2"))
    assert len(cards) == 4
    labels = cards[0]["metadata"]["labels"]
    assert (labels["accelerator-type"], labels["host-arch"]) == ("card-910b-2", "huawei-arm")
    assert cards[0]["status"]["allocatable"]["huawei.com/Ascend910"] == "2"
    types = {node_objects(m)[0]["metadata"]["labels"]["accelerator-type"] for m in topology.members}
    assert types == {"module-910b-8", "card-910b-2", "module"}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_bad_topology_is_refused_with_the_field_named(tmp_path: Path) -> None:
    pool = {"prefix": "n", "count": 1, "allocatable": {"cpu": "lots"}}
    with pytest.raises(
        TopologyError, match=r"members\.0\.nodePools\.0\.allocatable.*cpu: 'lots' is not a quantity"
    ):
        load_topology(write(tmp_path, {"members": [{"name": "m", "nodePools": [pool]}]}))
    pool = {"prefix": "n", "count": 1, "allocatable": {}, "colour": "red"}
    with pytest.raises(TopologyError, match=r"colour: Extra inputs are not permitted"):
        load_topology(write(tmp_path, {"members": [{"name": "m", "nodePools": [pool]}]}))
    twice = {"name": "m", "nodePools": [{"prefix": "n", "count": 1, "allocatable": {}}]}
    with pytest.raises(TopologyError, match="name 'm' is used twice"):
        load_topology(write(tmp_path, {"members": [twice, twice]}))
    with pytest.raises(TopologyError, match="cannot read the topology"):
        load_topology(tmp_path / "missing.yaml")


def test_the_kubeconfig_leads_back_to_the_control_endpoint(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    write_atomically(path, build_kubeconfig({"member-1": "http://127.0.0.1:1001"}, "http://127.0.0.1:2000"))
    written = yaml.safe_load(path.read_text())
    assert written["contexts"] == [
        {"name": "member-1", "context": {"cluster": "member-1", "user": "member-1-admin"}}
    ]
    assert written["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:1001"
    assert control_endpoint(path, "member-1") == "http://127.0.0.1:2000"
    assert path.stat().st_mode & 0o077 == 0
    assert [p.name for p in tmp_path.iterdir()] == ["kubeconfig"]  # no temp file left behind
    with pytest.raises(KubeconfigError, match=r"no context named 'member-9' \(contexts: member-1\)"):
        control_endpoint(path, "member-9")


def test_the_command_line_refuses_bad_input_before_starting(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["sim"])
    assert missing.exit_code == 2
    assert "--kubeconfig" in missing.output
    bad = runner.invoke(
        main,
        ["sim", "--kubeconfig", str(tmp_path / "kc"), "--topology", str(write(tmp_path, {"members": []}))],
    )
    assert bad.exit_code == 2
    assert "members: Tuple should have at least 1 item" in bad.output
    assert not (tmp_path / "kc").exists()
    kubeconfig = tmp_path / "kc.yaml"
    write_atomically(kubeconfig, build_kubeconfig({"member-1": "http://127.0.0.1:1"}, "http://127.0.0.1:9"))
    no_arg = runner.invoke(main, ["sim", "fault", "--kubeconfig", str(kubeconfig), "member-1", "slow"])
    assert no_arg.exit_code == 2
    assert "slow needs MS" in no_arg.output
    unreachable = runner.invoke(main, ["sim", "fault", "--kubeconfig", str(kubeconfig), "member-1", "down"])
    assert unreachable.exit_code == 1
    assert "control endpoint http://127.0.0.1:9 is not reachable" in unreachable.output


def test_a_members_labels_reach_fleet_through_its_kubeconfig_context(tmp_path: Path) -> None:
    from fleet.members import MemberConfigError, member_labels

    topology = load_topology()
    path = tmp_path / "kubeconfig"
    labels = {m.name: m.labels for m in topology.members}
    servers = {m.name: f"http://127.0.0.1:{1001 + i}" for i, m in enumerate(topology.members)}
    write_atomically(path, build_kubeconfig(servers, "http://127.0.0.1:2000", labels=labels))
    assert member_labels(path) == {
        "member-1": {"topology.kubernetes.io/region": "cn-north-1"},
        "member-2": {"topology.kubernetes.io/region": "cn-north-1"},
        "member-3": {"topology.kubernetes.io/region": "cn-south-1"},
    }
    written = yaml.safe_load(path.read_text())
    written["contexts"][0]["context"]["extensions"][0]["extension"]["labels"] = {"region": 1}
    path.write_text(yaml.safe_dump(written))
    with pytest.raises(
        MemberConfigError, match=r"context member-1: extensions\[fleet\.io/member\]\.labels must be a map"
    ):
        member_labels(path)


def test_sim_fault_reads_kubeconfig_then_the_local_fleet_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fleet sim fault member-2 down`` with no --kubeconfig: $KUBECONFIG, else ./fleet.kubeconfig
    (what ``fleet up`` writes), as the everyday commands read it (issue 33, req. 8)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    missing = CliRunner().invoke(main, ["sim", "fault", "member-2", "down"])
    assert missing.exit_code == 2 and "'fleet.kubeconfig' does not exist" in missing.output
    (tmp_path / "fleet.kubeconfig").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    found = CliRunner().invoke(main, ["sim", "fault", "member-2", "down"])
    assert found.exit_code == 1 and "member-2" in found.output, found.output
