"""``kubectl auth can-i`` (with ``--list``) and ``kubectl auth whoami`` at the fleet, for an admin
and a tenant, answered from the same authorization the API enforces (the whole matrix of answers
against requests is in ``test_auth.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import yaml

from fleet.endpoint.auth import parse_token_file
from tests.fleet.endpoint.conftest import JOB
from tests.fleet.endpoint.test_auth import TOKEN_FILE, TOKENS
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl, table

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[FleetApiThread]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    tokens = parse_token_file(TOKEN_FILE)
    with FleetApiThread(client, tokens=tokens, members=lambda: ["member-1"], tls=True) as api:
        yield api
    client.close()


def kubectl_as(server: FleetApiThread, who: str, directory: Path) -> Kubectl:
    config = server.kubeconfig(directory / f"{who}.kubeconfig", token=TOKENS[who])
    return Kubectl(require_kubectl(), config, directory / f"cache-{who}")


CAN_I = [
    # who, args, answer
    ("admin", ("create", "acjob", "-n", "team-a"), "yes"),
    ("admin", ("delete", "elasticquotatree", "-n", "kube-system"), "no"),  # never served
    ("admin", ("update", "elasticquotatree", "-n", "kube-system"), "yes"),
    ("admin", ("list", "acjob", "--all-namespaces"), "yes"),
    ("alice", ("create", "acjob", "-n", "team-a"), "yes"),
    ("alice", ("delete", "acjob/job", "-n", "team-a"), "yes"),
    ("alice", ("create", "acjob", "-n", "team-b"), "no"),
    ("alice", ("update", "acjob", "-n", "team-a"), "yes"),  # its metadata (fleet.jobs.updates)
    ("alice", ("patch", "acjob", "-n", "team-a", "--subresource", "status"), "no"),
    ("alice", ("list", "acjob", "--all-namespaces"), "no"),
    ("alice", ("get", "events", "-n", "team-a"), "yes"),
    ("alice", ("get", "memberclusters"), "yes"),
    ("alice", ("watch", "queues"), "yes"),
    ("alice", ("create", "elasticquotatree", "-n", "kube-system"), "no"),
    ("alice", ("create", "propagationpolicies", "-n", "team-a"), "no"),
    ("alice", ("list", "priorityclasses"), "yes"),
    ("alice", ("create", "priorityclasses"), "no"),
    ("admin", ("create", "priorityclasses"), "yes"),
    ("alice", ("get", "/healthz"), "yes"),
    ("alice", ("get", "/metrics"), "no"),  # a grant of its own, as system:monitoring has
    ("admin", ("get", "/metrics"), "yes"),
    ("prometheus", ("get", "/metrics"), "yes"),
    ("prometheus", ("get", "acjob", "-n", "team-a"), "no"),
    ("bob", ("get", "acjob", "-n", "team-a"), "no"),
    ("bob", ("get", "acjob", "-n", "team-b"), "yes"),
]


@pytest.mark.parametrize(("who", "args", "answer"), CAN_I, ids=[f"{w}-{'-'.join(a)}" for w, a, _ in CAN_I])
def test_can_i(server: FleetApiThread, tmp_path: Path, who: str, args: tuple[str, ...], answer: str) -> None:
    done = kubectl_as(server, who, tmp_path)("auth", "can-i", *args, ok=False)
    assert (done.stdout.strip(), done.returncode) == (answer, 0 if answer == "yes" else 1), done.stderr


def rules(output: str) -> dict[str, list[str]]:
    """``kubectl auth can-i --list``: resource -> verbs (the non-resource URL lines left out)."""
    out = {}
    for line in output.splitlines()[1:]:
        if line.strip() and not line.startswith(" "):
            out[line.split()[0]] = line[line.rindex("[") + 1 : line.rindex("]")].split()
    return out


def test_can_i_list_for_a_tenant_and_an_admin(server: FleetApiThread, tmp_path: Path) -> None:
    alice = rules(kubectl_as(server, "alice", tmp_path)("auth", "can-i", "--list", "-n", "team-a").stdout)
    assert alice["ascendjobs.mindxdl.gitee.com"] == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert alice["events"] == ["get", "list", "watch"]
    assert alice["memberclusters.fleet.io"] == ["get", "list", "watch"]
    assert alice["selfsubjectaccessreviews.authorization.k8s.io"] == ["create"]
    assert alice["ascendjobs.mindxdl.gitee.com/status"] == ["get"]  # the status is written by Fleet
    # The classes a job may name are read by every user, written by an admin only.
    assert alice["priorityclasses.scheduling.k8s.io"] == ["get", "list", "watch"]
    listed = kubectl_as(server, "alice", tmp_path)("get", "priorityclasses")
    assert listed.returncode == 0 and "No resources found" in listed.stderr
    elsewhere = rules(kubectl_as(server, "alice", tmp_path)("auth", "can-i", "--list", "-n", "team-b").stdout)
    assert "ascendjobs.mindxdl.gitee.com" not in elsewhere
    admin = rules(kubectl_as(server, "admin", tmp_path)("auth", "can-i", "--list", "-n", "team-b").stdout)
    assert "update" in admin["elasticquotatrees.scheduling.sigs.k8s.io"]
    assert "patch" in admin["ascendjobs.mindxdl.gitee.com/status"]


def test_metrics_through_kubectl_need_the_grant(server: FleetApiThread, tmp_path: Path) -> None:
    """``kubectl get --raw /metrics``: a tenant is refused in kube-apiserver's words, the
    metrics reader (Prometheus' token) reads them; ``can-i --list`` shows the path to it only."""
    refused = kubectl_as(server, "alice", tmp_path)("get", "--raw", "/metrics", ok=False)
    assert refused.returncode == 1
    assert (
        'Error from server (Forbidden): forbidden: User "alice" cannot get path "/metrics"' in refused.stderr
    )
    read = kubectl_as(server, "prometheus", tmp_path)("get", "--raw", "/metrics")
    assert "apiserver_requests_total" in read.stdout
    for who, listed in (("alice", False), ("prometheus", True)):
        out = kubectl_as(server, who, tmp_path)("auth", "can-i", "--list").stdout
        assert ("[/metrics]" in out) is listed, out


def test_whoami(server: FleetApiThread, tmp_path: Path) -> None:
    done = kubectl_as(server, "bob", tmp_path)("auth", "whoami", "-o", "json")
    info = json.loads(done.stdout)["status"]["userInfo"]
    assert info == {
        "username": "bob",
        "uid": "u-3",
        "groups": ["namespace:team-b", "some:other", "system:authenticated"],
    }
    rows = table(kubectl_as(server, "alice", tmp_path)("auth", "whoami").stdout)
    assert rows[0] == ["ATTRIBUTE", "VALUE"]
    assert ["Username", "alice"] in rows


def test_a_tenant_creates_by_server_side_apply_in_its_namespace_only(
    server: FleetApiThread, tmp_path: Path
) -> None:
    """Creating by apply is authorized as a create, changing as a patch (which a tenant may do to
    its job's own metadata, not to Fleet's keys): what can-i says for each. Re-applying the same
    file changes nothing and is let through (a GitOps tool applies on every sync)."""
    job = yaml.safe_load(JOB.read_text())
    job["metadata"]["namespace"] = "team-a"
    alice = kubectl_as(server, "alice", tmp_path)
    created = alice("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(job))
    assert created.stdout.strip() == "ascendjob.mindxdl.gitee.com/default-test-pytorch serverside-applied"
    again = alice("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(job))
    assert again.stdout.strip() == created.stdout.strip()
    job["metadata"]["labels"]["changed"] = "yes"
    changed = alice("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(job))
    assert changed.stdout.strip() == created.stdout.strip()
    job["metadata"]["labels"]["fleet.io/job-uid"] = "forged"
    forged = alice("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(job), ok=False)
    assert forged.returncode == 1 and "metadata.labels[fleet.io/job-uid]: Forbidden" in forged.stderr
    del job["metadata"]["labels"]["fleet.io/job-uid"]
    assert alice("auth", "can-i", "patch", "acjob", "-n", "team-a").stdout.strip() == "yes"
    job["metadata"]["namespace"] = "team-b"
    elsewhere = alice("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(job), ok=False)
    assert elsewhere.returncode == 1 and 'cannot create resource "ascendjobs"' in elsewhere.stderr
