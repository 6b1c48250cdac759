"""``kubectl get namespaces`` at the fleet: those the quota tree binds and those holding objects,
each with its quota node and queue; read-only; a tenant sees only its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import yaml

from fleet.endpoint.auth import parse_token_file
from tests.fleet.endpoint.conftest import JOB, POLICIES
from tests.fleet.endpoint.test_auth import TOKEN_FILE, TOKENS, TREE
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl, table

pytestmark = pytest.mark.integration


def as_yaml(path: Path, namespace: str) -> str:
    obj = yaml.safe_load(path.read_text())
    obj["metadata"]["namespace"] = namespace
    return yaml.safe_dump(obj)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetApiThread]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    tokens = parse_token_file(TOKEN_FILE)
    with FleetApiThread(client, tokens=tokens, members=lambda: ["member-1"], tls=True) as api:
        admin = kubectl_as(api, "admin", tmp_path_factory.mktemp("admin"))
        admin("apply", "-f", "-", stdin=yaml.safe_dump(TREE))
        admin("apply", "-f", "-", stdin=as_yaml(JOB, "team-a"))
        admin("apply", "-f", "-", stdin=as_yaml(POLICIES[0], "ops"))  # a namespace no node binds
        yield api
    client.close()


def kubectl_as(server: FleetApiThread, who: str, directory: Path) -> Kubectl:
    config = server.kubeconfig(directory / f"{who}.kubeconfig", token=TOKENS[who])
    return Kubectl(require_kubectl(), config, directory / f"cache-{who}")


def test_the_admin_sees_every_namespace_with_its_quota_node(server: FleetApiThread, tmp_path: Path) -> None:
    rows = table(kubectl_as(server, "admin", tmp_path)("get", "namespaces", "-o", "wide").stdout)
    assert rows[0] == ["NAME", "STATUS", "AGE", "QUOTA-NODE", "QUEUE"]
    assert [[r[0], r[1], r[3], r[4]] for r in rows[1:]] == [
        ["kube-system", "Active", "<none>", "<none>"],  # holds the tree
        ["ops", "Active", "<none>", "<none>"],  # holds a policy; its jobs would be refused
        ["team-a", "Active", "a", "root-a"],  # bound and holding a job
        ["team-b", "Active", "b", "root-b"],  # bound, empty
    ]
    selected = table(kubectl_as(server, "admin", tmp_path)("get", "ns", "-l", "fleet.io/quota-node=b").stdout)
    assert [r[0] for r in selected[1:]] == ["team-b"]


def test_a_tenant_sees_only_its_own(server: FleetApiThread, tmp_path: Path) -> None:
    alice = kubectl_as(server, "alice", tmp_path)
    assert [r[0] for r in table(alice("get", "namespaces").stdout)[1:]] == ["team-a"]
    own = yaml.safe_load(alice("get", "namespace", "team-a", "-o", "yaml").stdout)
    assert own["status"] == {"phase": "Active", "quotaNode": "a", "queue": "root-a"}
    assert own["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"
    other = alice("get", "namespace", "team-b", ok=False)
    assert other.returncode == 1 and "forbidden" in other.stderr.lower()
    bob = kubectl_as(server, "bob", tmp_path)
    assert [r[0] for r in table(bob("get", "ns").stdout)[1:]] == ["team-b"]


def test_namespaces_are_read_only(server: FleetApiThread, tmp_path: Path) -> None:
    admin = kubectl_as(server, "admin", tmp_path)
    created = admin("create", "namespace", "new-team", ok=False)
    assert created.returncode == 1
    assert created.stderr.strip() == (
        "Error from server (MethodNotAllowed): namespaces is read-only: create is not supported"
    )
    deleted = admin("delete", "namespace", "team-b", ok=False)
    assert deleted.returncode == 1 and "read-only (computed by Fleet)" in deleted.stderr


def test_without_a_tree_every_namespace_is_charged_to_root(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(JOB))
    rows = table(kubectl("get", "ns").stdout)
    assert rows[1] == ["default", "Active", "<unknown>", "root"]
