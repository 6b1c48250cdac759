"""What users and admins type every day, against a fleet endpoint and a member over HTTP.

``fleet quota apply``, ``fleet get acjob [-M]``, ``fleet describe acjob``, ``fleet queues`` and
``fleet clusters`` read and write only through the kubeconfig, as kubectl does. The fleet here is
one API replica over fakeredis and one simulated member; the dispatcher's quota step is done by
:func:`dispatch_once`, and the member copy a worker would create is created the same way, with the
labels naming the fleet job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
import yaml
from click.testing import CliRunner, Result
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from fleet.cli import main
from fleet.endpoint.auth import ADMIN_GROUP, NAMESPACE_GROUP_PREFIX, Identity
from fleet.endpoint.members import members_from
from fleet.labels import JOB_UID_LABEL
from fleet.state import Objects
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from fleet.state.member_health import MemberHealth, write_health
from queues import Ledger, load
from tests.support.dispatch_pass import dispatch_once
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import CARD_POOL, running_sim, small_topology

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TREE = ROOT / "config" / "samples" / "elasticquotatree.yaml"
JOB = ROOT / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"
ADMIN = "admin-token-5d1e"
USER_B = "user-b-token-77aa"
TOKENS = {
    ADMIN: Identity("admin", "1", frozenset({ADMIN_GROUP})),
    USER_B: Identity("bob", "2", frozenset({NAMESPACE_GROUP_PREFIX + "team-b"})),
}


@dataclass
class Fleet:
    redis: redis.Redis
    api: FleetApiThread
    kubeconfig: Path
    member_api: k8s.ApiClient

    def fleet(self, *args: str, token: str | None = None) -> Result:
        """``fleet ARGS --kubeconfig K`` in process, stdout and stderr apart."""
        config = self.kubeconfig if token is None else self.with_token(token)
        return CliRunner().invoke(main, [*args, "--kubeconfig", str(config)])

    def submit(self, name: str) -> dict[str, Any]:
        """The sample AscendJob under ``name``, created at the fleet by the official client."""
        job = yaml.safe_load(JOB.read_text())
        job["metadata"]["name"] = name
        api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig), context="fleet")  # type: ignore[no-untyped-call]
        with api:
            created = k8s.CustomObjectsApi(api).create_namespaced_custom_object(
                "mindxdl.gitee.com", "v1", "default", "ascendjobs", job
            )
        assert isinstance(created, dict)
        return created

    def with_token(self, token: str) -> Path:
        config = yaml.safe_load(self.kubeconfig.read_text())
        for user in config["users"]:
            if user["name"] == "fleet":
                user["user"] = {"token": token}
        path = self.kubeconfig.with_name(f"kubeconfig-{token}")
        path.write_text(yaml.safe_dump(config))
        return path


def combined_kubeconfig(path: Path, fleet_url: str, members: Path) -> Path:
    """``fleet`` (current, the admin's token) plus every context of the simulator's kubeconfig."""
    config = yaml.safe_load(members.read_text())
    config["clusters"].append({"name": "fleet", "cluster": {"server": fleet_url}})
    config["users"].append({"name": "fleet", "user": {"token": ADMIN}})
    config["contexts"].append(
        {"name": "fleet", "context": {"cluster": "fleet", "user": "fleet", "namespace": "default"}}
    )
    config["current-context"] = "fleet"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    topology = small_topology({"member-1": CARD_POOL}, jobDurationSeconds=600)
    with running_sim(topology) as sim:
        placeholder = combined_kubeconfig(tmp_path / "members", "http://127.0.0.1:1", sim.kubeconfig)
        with FleetApiThread(client, tokens=TOKENS, members=members_from(placeholder)) as api:
            kubeconfig = combined_kubeconfig(tmp_path / "kubeconfig", api.url, sim.kubeconfig)
            member_api = k8s_config.new_client_from_config(config_file=str(kubeconfig), context="member-1")  # type: ignore[no-untyped-call]
            yield Fleet(client, api, kubeconfig, member_api)
            member_api.close()
    client.close()


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def copy_on_member(fleet: Fleet, job: dict[str, Any]) -> None:
    """What a worker creates: the job under its own name, labelled with the fleet job's uid."""
    copy = yaml.safe_load(JOB.read_text())
    copy["metadata"]["name"] = job["metadata"]["name"]
    copy["metadata"]["labels"] = {**copy["metadata"].get("labels", {}), JOB_UID_LABEL: job["metadata"]["uid"]}
    k8s.CustomObjectsApi(fleet.member_api).create_namespaced_custom_object(
        "mindxdl.gitee.com", "v1", "default", "ascendjobs", copy
    )


def test_quota_apply_goes_through_the_endpoint_with_its_warning(fleet: Fleet, tmp_path: Path) -> None:
    applied = fleet.fleet("quota", "apply", "-f", str(TREE))
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[0].startswith("warning: root: max differs from min")
    assert applied.stdout.splitlines()[-1] == "elasticquotatree applied, version 1"
    again = fleet.fleet("quota", "apply", "-f", str(TREE))
    assert again.stdout.splitlines()[-1] == "elasticquotatree unchanged, version 1"
    changed = yaml.safe_load(TREE.read_text())
    changed["spec"]["root"]["children"][0]["max"]["kube-queue/max-jobs"] = 2
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(changed))
    refused = fleet.fleet("quota", "apply", "-f", str(path), token=USER_B)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: ") and "forbidden" in refused.stderr.lower()
    assert fleet.fleet("quota", "apply", "-f", str(path)).stdout.splitlines()[-1] == (
        "elasticquotatree applied, version 2"
    )


def test_get_describe_queues_and_clusters_show_what_happened(fleet: Fleet) -> None:
    assert fleet.fleet("quota", "apply", "-f", str(TREE)).exit_code == 0
    first = fleet.submit("first")
    fleet.submit("second")
    outcome = dispatch_once(fleet.redis, ["default/first", "default/second"])
    assert outcome["second"] == "quota root/child-2: kube-queue/max-jobs 1/1 in use"
    copy_on_member(fleet, first)

    listed = fleet.fleet("get", "acjob")
    assert listed.exit_code == 0, listed.output
    table = rows(listed.stdout)
    assert table[0] == ["NAME", "STATE", "CLUSTER", "QUEUE", "AGE"]
    assert [r[:4] for r in table[1:]] == [
        ["first", "Admitted", "member-1", "root-child-2"],
        ["second", "Queued", "<none>", "root-child-2"],
    ]
    assert "\x1b[" not in listed.stdout  # no colour when stdout is not a terminal

    per_member = fleet.fleet("get", "acjob", "-M")
    assert per_member.exit_code == 0, per_member.output
    table = rows(per_member.stdout)
    assert table[0] == ["NAME", "CLUSTER", "STATE", "AGE", "ADOPTION"]
    assert table[1][:2] == ["first", "member-1"] and table[1][2] != "Queued"
    assert table[2][:3] == ["second", "<none>", "Queued"]

    described = fleet.fleet("describe", "acjob", "second")
    assert described.exit_code == 0, described.output
    lines = described.stdout.splitlines()
    assert "State:" in lines[2] and lines[2].split()[-1] == "Queued"
    assert any(
        line.startswith("Pending:") and line.endswith("quota root/child-2: kube-queue/max-jobs 1/1 in use")
        for line in lines
    ), described.stdout
    assert "Position:  1 of 1 in queue root-child-2" in lines, described.stdout
    assert "Blocker:   quota root/child-2: kube-queue/max-jobs 1/1 in use" in lines, described.stdout
    events = described.stdout.split("Events:", 1)[1]
    assert "QuotaExceeded" in events and "kube-queue/max-jobs 1/1 in use" in events
    first_described = fleet.fleet("describe", "acjob", "first").stdout
    assert "Position:" not in first_described and "Blocker:" not in first_described

    queues = fleet.fleet("queues")
    assert queues.exit_code == 0, queues.output
    by_name = {r[0]: r for r in rows(queues.stdout)}
    assert by_name["NAME"] == [
        "NAME",
        "MIN",
        "MAX",
        "USED",
        "BORROWED",
        "LENT",
        "SHARE",
        "BELOW-MIN",
        "ADMITTED",
        "WAITING",
    ]
    # child-2 has no min: its use is measured against its max (one job of max-jobs 1) and all of
    # it is beyond its (zero) guarantee, in the resources its root names.
    assert by_name["root-child-2"][4:] == ["-", "-", "1.00", "false", "1", "1"]
    assert by_name["root"][4:] == ["-", "-", "0.00", "true", "1", "1"]

    now = time.time()
    write_health(
        fleet.redis,
        DEFAULT_DISPATCH_KEYS,
        "member-1",
        MemberHealth(False, now, probed=now, error="connection refused"),
    )
    clusters = fleet.fleet("clusters")
    assert clusters.exit_code == 0, clusters.output
    table = rows(clusters.stdout)
    assert table[0][:2] == ["NAME", "READY"]
    assert table[1][:2] == ["member-1", "False"]
    assert "connection refused" in clusters.stdout


def test_a_user_sees_only_their_namespace_and_errors_name_the_cause(fleet: Fleet, tmp_path: Path) -> None:
    assert fleet.fleet("quota", "apply", "-f", str(TREE)).exit_code == 0
    fleet.submit("first")
    stored, _ = Objects(fleet.redis).list(FLEET_ASCENDJOB)
    assert [o["metadata"]["name"] for o in stored] == ["first"]

    theirs = fleet.fleet("get", "acjob", "-n", "team-b", token=USER_B)
    assert theirs.exit_code == 0
    assert theirs.stderr.strip() == "No resources found in team-b namespace."
    other = fleet.fleet("describe", "acjob", "first", "-n", "default", token=USER_B)
    assert other.exit_code == 1
    assert other.stderr.startswith("error: ") and "forbidden" in other.stderr.lower()
    missing = fleet.fleet("describe", "acjob", "nope")
    assert missing.exit_code == 1 and "not found" in missing.stderr.lower()

    gone = tmp_path / "gone"
    config = yaml.safe_load(fleet.kubeconfig.read_text())
    for cluster in config["clusters"]:
        if cluster["name"] == "fleet":
            cluster["cluster"]["server"] = "http://127.0.0.1:1"
    gone.write_text(yaml.safe_dump(config))
    down = CliRunner().invoke(main, ["get", "acjob", "--kubeconfig", str(gone)])
    assert down.exit_code == 1
    assert down.stderr.startswith("error: ") and "127.0.0.1:1" in down.stderr


CONTENDED_TREE = {
    "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
    "kind": "ElasticQuotaTree",
    "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
    "spec": {
        "root": {
            "name": "root",
            "min": {"huawei.com/Ascend910": 16, "cpu": 64},
            "max": {"huawei.com/Ascend910": 16, "cpu": 64},
            "children": [
                {
                    "name": team,
                    "min": {"huawei.com/Ascend910": 8, "cpu": 32},
                    "max": {"huawei.com/Ascend910": 16, "cpu": 64},
                    "namespaces": [team],
                }
                for team in ("team-a", "team-b")
            ],
        }
    },
}


def test_queues_show_what_each_team_borrows_lends_and_its_share(tmp_path: Path) -> None:
    """team-b runs 12 NPUs on a guarantee of 8; team-a, using 2 of its 8, has 4 of them taken."""
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    ledger = Ledger(client)
    ledger.apply(load(CONTENDED_TREE)[0])
    npu = "huawei.com/Ascend910"
    assert ledger.admit("team-b/1", "team-b", {npu: 12, "cpu": 8000}).admitted
    assert ledger.admit("team-a/1", "team-a", {npu: 2, "cpu": 500}).admitted
    for i in range(3):
        ledger.enqueue(f"team-a/w{i}", "team-a", {npu: 8})
    with FleetApiThread(client) as api:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        done = CliRunner().invoke(main, ["queues", "--kubeconfig", str(kubeconfig)])
    client.close()
    assert done.exit_code == 0, done.output
    table = rows(done.stdout)
    assert table == [
        ["NAME", "MIN", "MAX", "USED", "BORROWED", "LENT", "SHARE", "BELOW-MIN", "ADMITTED", "WAITING"],
        [
            "root",
            f"cpu=64,{npu}=16",
            f"cpu=64,{npu}=16",
            f"cpu=8500m,{npu}=14",
            "-",
            "-",
            "0.88",
            "true",
            "2",
            "3",
        ],
        [
            "root-team-a",
            f"cpu=32,{npu}=8",
            f"cpu=64,{npu}=16",
            f"cpu=500m,{npu}=2",
            "-",
            f"{npu}=4",
            "0.25",
            "true",
            "1",
            "3",
        ],
        [
            "root-team-b",
            f"cpu=32,{npu}=8",
            f"cpu=64,{npu}=16",
            f"cpu=8,{npu}=12",
            f"{npu}=4",
            "-",
            "1.50",
            "true",
            "1",
            "0",
        ],
    ]
