"""The real kubectl against the serving core: what a user types at a member cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.apiserver import ApiServerThread
from tests.support.kinds import ASCENDJOB

pytestmark = pytest.mark.integration

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
KUBECTL = shutil.which("kubectl")
SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"
JOB = "default-test-pytorch"

NODE_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    accelerator: huawei-Ascend910
    host-arch: huawei-arm
    accelerator-type: card-910b-2
spec: {{}}
status:
  allocatable: {{cpu: "64", memory: 256Gi, pods: "110", huawei.com/Ascend910: "2"}}
  capacity: {{cpu: "64", memory: 256Gi, pods: "110", huawei.com/Ascend910: "2"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status}}
  nodeInfo: {{kubeletVersion: v1.32.0-sim, osImage: EulerOS, architecture: arm64}}
"""


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path, cache: Path) -> None:
        self.base = [binary, f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}"]

    def __call__(
        self, *args: str, ok: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, input=stdin, timeout=30, check=False
        )
        if ok and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.base, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


@pytest.fixture
def kubectl(apiserver: ApiServerThread, tmp_path: Path) -> Kubectl:
    if KUBECTL is None:
        if IN_CI:
            pytest.fail("kubectl is not installed; CI must run the kubectl tests")
        pytest.skip("kubectl is not installed")
    return Kubectl(KUBECTL, apiserver.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


@pytest.fixture
def applied_node(kubectl: Kubectl, tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "node.yaml"
    path.write_text(NODE_YAML.format(name="npu-node-1"))
    assert "node/npu-node-1 created" in kubectl("apply", "-f", str(path)).stdout
    yield "npu-node-1"


def table(output: str) -> list[list[str]]:
    """Rows of kubectl's column output, split on runs of two or more spaces."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def set_job_state(apiserver: ApiServerThread, *states: str) -> None:
    async def update() -> None:
        job: dict[str, Any] = await apiserver.store.get(ASCENDJOB, "default", JOB)
        job["status"] = {"conditions": [{"type": s, "status": "True"} for s in states]}
        await apiserver.store.update(ASCENDJOB, job, subresource="status")

    apiserver.call(update())


def test_get_nodes_cordon_label_and_taint(kubectl: Kubectl, applied_node: str, tmp_path: Path) -> None:
    rows = table(kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[1][:3] == [applied_node, "Ready", "<none>"] and rows[1][4] == "v1.32.0-sim"
    assert "node/npu-node-1 cordoned" in kubectl("cordon", applied_node).stdout
    assert table(kubectl("get", "node", applied_node).stdout)[1][1] == "Ready,SchedulingDisabled"
    kubectl("uncordon", applied_node)
    assert table(kubectl("get", "no", applied_node).stdout)[1][1] == "Ready"
    assert "labeled" in kubectl("label", "node", applied_node, "pool=a").stdout
    labelled = table(
        kubectl("get", "nodes", "-l", "pool=a,accelerator-type in (card-910b-2)", "-L", "pool").stdout
    )
    assert labelled[0][-1] == "POOL" and labelled[1][0] == applied_node and labelled[1][-1] == "a"
    kubectl("label", "node", applied_node, "pool-")
    assert "No resources found" in kubectl("get", "nodes", "-l", "pool").stderr
    kubectl("taint", "node", applied_node, "dedicated=npu:NoSchedule")
    taints = kubectl("get", "node", applied_node, "-o", "jsonpath={.spec.taints[*].key}").stdout
    assert taints == "dedicated"
    kubectl("taint", "node", applied_node, "dedicated=npu:NoSchedule-")
    assert kubectl("get", "node", applied_node, "-o", "jsonpath={.spec.taints}").stdout == ""
    reapplied = tmp_path / "node.yaml"
    reapplied.write_text(
        NODE_YAML.format(name=applied_node).replace("spec: {}", "spec: {unschedulable: true}")
    )
    assert "configured" in kubectl("apply", "-f", str(reapplied)).stdout  # a 3-way strategic patch
    assert table(kubectl("get", "node", applied_node).stdout)[1][1] == "Ready,SchedulingDisabled"
    wide = table(kubectl("get", "nodes", "-o", "wide").stdout)
    assert wide[0][:7] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP"]


def test_get_namespaces(kubectl: Kubectl) -> None:
    # kubectl's typed generators (``create namespace``) send protobuf, which the core does not
    # speak (415); manifests go as JSON.
    kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    rows = table(kubectl("get", "ns").stdout)
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert [r[:2] for r in rows[1:]] == [
        ["default", "Active"],
        ["kube-public", "Active"],
        ["kube-system", "Active"],
        ["team-a", "Active"],
    ]


def test_apply_the_sample_ascendjob_then_change_it(
    kubectl: Kubectl, apiserver: ApiServerThread, tmp_path: Path
) -> None:
    assert f"ascendjob.mindxdl.gitee.com/{JOB} created" in kubectl("apply", "-f", str(SAMPLE)).stdout
    rows = table(kubectl("get", "acjob").stdout)
    assert rows[0] == ["NAME", "STATE", "AGE"]
    assert rows[1][:2] == [JOB, "<none>"]
    set_job_state(apiserver, "Created", "Running")
    assert table(kubectl("get", "ascendjobs").stdout)[1][:2] == [JOB, "Running"]

    changed = tmp_path / "job.yaml"
    changed.write_text(SAMPLE.read_text().replace("minAvailable: 2", "minAvailable: 1"))
    assert "configured" in kubectl("apply", "-f", str(changed)).stdout
    assert "unchanged" in kubectl("apply", "-f", str(changed)).stdout
    applied = kubectl("get", "acjob", JOB, "-o", "yaml").stdout
    assert "minAvailable: 1" in applied and "generation: 2" in applied
    assert "kubectl.kubernetes.io/last-applied-configuration" in applied
    assert "type: Running" in applied  # the status survived the apply

    uid = kubectl("get", "acjob", JOB, "-o", "jsonpath={.metadata.uid}").stdout
    event = f"""\
apiVersion: v1
kind: Event
metadata: {{name: {JOB}.created, namespace: default}}
involvedObject:
  {{apiVersion: mindxdl.gitee.com/v1, kind: AscendJob, name: {JOB}, namespace: default, uid: {uid}}}
reason: PodGroupPending
message: waiting for 2 nodes
type: Warning
"""
    kubectl("create", "-f", "-", stdin=event)
    described = kubectl("describe", "acjob", JOB).stdout
    assert f"Name:         {JOB}" in described and "Min Available:  1" in described
    # describe finds the job's events by involvedObject field selectors, uid included
    assert "Warning  PodGroupPending" in described and "waiting for 2 nodes" in described


def test_get_acjob_watch_sees_a_change(kubectl: Kubectl, apiserver: ApiServerThread) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    watcher = kubectl.popen("get", "acjob", "-w")
    try:
        assert watcher.stdout is not None
        header = watcher.stdout.readline()
        assert header.split() == ["NAME", "STATE", "AGE"]
        assert watcher.stdout.readline().split()[:2] == [JOB, "<none>"]
        set_job_state(apiserver, "Created")
        assert watcher.stdout.readline().split()[:2] == [JOB, "Created"]
    finally:
        watcher.kill()
        watcher.communicate(timeout=10)


def test_describe_node_lists_its_pods(kubectl: Kubectl, applied_node: str) -> None:
    pod = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: worker-0, namespace: default}}
spec:
  nodeName: {applied_node}
  containers:
  - name: ascend
    image: pytorch-test:latest
    resources:
      requests: {{cpu: "2", huawei.com/Ascend910: "2"}}
      limits: {{huawei.com/Ascend910: "2"}}
"""
    kubectl("apply", "-f", "-", stdin=pod)
    described = kubectl("describe", "node", applied_node).stdout
    assert "accelerator-type=card-910b-2" in described
    assert "worker-0" in described and "Non-terminated Pods:          (1 in total)" in described
    pods = table(kubectl("get", "pods", "-o", "wide").stdout)
    assert pods[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert pods[1][:3] == ["worker-0", "0/1", "Pending"] and pods[1][6] == applied_node


def test_delete_dry_run_errors_and_events(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    dry = kubectl("delete", "acjob", JOB, "--dry-run=server").stdout
    assert "deleted (server dry run)" in dry
    assert JOB in kubectl("get", "acjob").stdout
    created = kubectl("apply", "-f", str(SAMPLE), "--dry-run=server")
    assert "unchanged" in created.stdout or "configured" in created.stdout
    assert f'ascendjob.mindxdl.gitee.com "{JOB}" deleted' in kubectl("delete", "acjob", JOB).stdout
    missing = kubectl("get", "acjob", JOB, ok=False)
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        == f'Error from server (NotFound): ascendjobs.mindxdl.gitee.com "{JOB}" not found'
    )
    bad = kubectl(
        "create", "-f", "-", ok=False, stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: Bad_Name}\n"
    )
    assert 'The Namespace "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"' in bad.stderr
    event = """\
apiVersion: v1
kind: Event
metadata: {name: job-created, namespace: default}
involvedObject: {kind: AscendJob, name: default-test-pytorch, namespace: default}
reason: JobCreated
message: the job was created
type: Normal
"""
    kubectl("apply", "-f", "-", stdin=event)
    rows = table(kubectl("get", "events").stdout)
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[1][1:] == ["Normal", "JobCreated", "ascendjob/default-test-pytorch", "the job was created"]


def test_create_with_server_dry_run_changes_nothing(kubectl: Kubectl) -> None:
    out = kubectl("apply", "-f", str(SAMPLE), "--dry-run=server").stdout
    assert "created (server dry run)" in out
    assert "No resources found" in kubectl("get", "acjob").stderr


def test_explain_acjob(kubectl: Kubectl) -> None:
    explained = kubectl("explain", "acjob").stdout
    assert "KIND:       AscendJob" in explained and "GROUP:      mindxdl.gitee.com" in explained
    assert "spec\t<Object>" in explained


@pytest.mark.parametrize(
    ("validate", "code", "says"),
    [
        ("strict", 1, 'strict decoding error: unknown field "spek"'),
        ("warn", 0, 'Warning: unknown field "spek"'),
        ("false", 0, ""),
    ],
)
def test_validate_at_a_member_knows_the_top_level_fields(
    kubectl: Kubectl, validate: str, code: int, says: str
) -> None:
    """A simulated member's kinds have no schema: its API server knows their top-level fields
    (an unknown one is refused, warned of or dropped as fieldValidation says), nothing below."""
    job = yaml.safe_load(SAMPLE.read_text())
    job["spek"] = {"a": 1}
    job["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containerz"] = []
    done = kubectl("apply", "-f", "-", f"--validate={validate}", stdin=yaml.safe_dump(job), ok=False)
    assert done.returncode == code, done.stderr
    assert says in done.stderr if says else done.stderr == ""
    listed = json.loads(kubectl("get", "acjob", "-o", "json").stdout)["items"]
    if code:
        assert listed == []
    else:
        [kept] = listed
        assert "spek" not in kept
        assert kept["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containerz"] == []


def test_typed_create_commands_at_a_member(kubectl: Kubectl) -> None:
    """kubectl's typed creates (protobuf bodies) of the kinds a member serves; a member has no
    PriorityClass kind, so creating one is answered as a cluster without it answers."""
    kubectl("create", "configmap", "env", "--from-literal=EPOCHS=90")
    kubectl("create", "secret", "generic", "obs", "--from-literal=key=s3cret")
    kubectl("create", "service", "clusterip", "hosts", "--clusterip=None", "--tcp=2222:2222")
    names = kubectl("get", "cm,secret,svc", "-o", "name").stdout.split()
    assert {"configmap/env", "secret/obs", "service/hosts"} <= set(names)
    missing = kubectl("create", "priorityclass", "urgent", "--value=10", ok=False)
    assert missing.returncode == 1
    assert "the server could not find the requested resource" in missing.stderr


def test_kubectl_patch_type_json_applies_rfc6902_and_refuses_a_failed_test_changing_nothing(
    kubectl: Kubectl, applied_node: str
) -> None:
    """``kubectl patch --type json`` as users write it: operations in order, all or nothing, and
    a failing ``test`` answered as a 422 that names the path."""
    ops = (
        '[{"op": "add", "path": "/metadata/labels/pool", "value": "a"},'
        ' {"op": "copy", "from": "/metadata/labels/pool", "path": "/metadata/labels/pool-copy"},'
        ' {"op": "add", "path": "/spec/taints",'
        '  "value": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}]'
    )
    assert "patched" in kubectl("patch", "node", applied_node, "--type", "json", "-p", ops).stdout
    labels = kubectl("get", "node", applied_node, "-o", "jsonpath={.metadata.labels.pool-copy}").stdout
    assert labels == "a"
    assert kubectl("get", "node", applied_node, "-o", "jsonpath={.spec.taints[0].key}").stdout == "k"
    failing = (
        '[{"op": "replace", "path": "/metadata/labels/pool", "value": "b"},'
        ' {"op": "test", "path": "/metadata/labels/pool", "value": "c"}]'
    )
    refused = kubectl("patch", "node", applied_node, "--type", "json", "-p", failing, ok=False)
    assert refused.returncode != 0 and "test operation failed: /metadata/labels/pool" in refused.stderr
    assert kubectl("get", "node", applied_node, "-o", "jsonpath={.metadata.labels.pool}").stdout == "a"
