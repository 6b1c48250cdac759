"""``kubectl explain`` at every depth at the fleet, from the kinds' schemas, and validation by the
same schemas: the OpenAPI the fleet serves and what it refuses can never disagree."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.apiserver.schema import schema_causes
from fleet.endpoint.registry import fleet_registry
from tests.fleet.endpoint.conftest import JOB, POLICIES, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("path", "kind", "says"),
    [
        ("acjob.spec.replicaSpecs", "FIELD: replicaSpecs <map[string]ReplicaSpec>", "replicas\t<integer>"),
        ("acjob.spec.replicaSpecs.template.spec", "FIELD: spec <Object>", "PodSpec"),
        # Kubernetes' own types at depth, from the official client's models.
        (
            "acjob.spec.replicaSpecs.template.spec.containers.resources",
            "FIELD: resources <ResourceRequirements>",
            "limits\t<map[string]Object>",
        ),
        ("pytorchjob.spec.pytorchReplicaSpecs.template.metadata", "<TemplateMetadata>", "labels"),
        ("acjob.metadata.labels", "FIELD: labels <map[string]string>", "Map of string keys"),
        ("acjob.spec.runPolicy.schedulingPolicy.minAvailable", "FIELD: minAvailable <integer>", "at once"),
        ("elasticquotatree.spec.root", "FIELD: root <QuotaNode>", "children\t<[]QuotaNode>"),
        ("elasticquotatree.spec.root.children.children.namespaces", "FIELD: namespaces <[]string>", "leaves"),
        ("propagationpolicy.spec.failover.application.purgeMode", "FIELD: purgeMode <string>", "Gracefully"),
        ("priorityclass.value", "FIELD: value <integer>", "higher first"),
        (
            "memberclusters.status.accelerators.nodesByFreeNPUs",
            "FIELD: nodesByFreeNPUs <map[string]integer>",
            "8",
        ),
        ("queue.status.share", "FIELD: share <string>", "dominant share"),
        ("namespace.status.quotaNode", "FIELD: quotaNode <string>", "quota tree"),
        ("event.involvedObject.name", "FIELD: name <string>", "Name of the referent"),
        ("pytorchjob.spec.pytorchReplicaSpecs", "<map[string]ReplicaSpec>", "restartPolicy\t<string>"),
        ("pytorchjob.spec.elasticPolicy.rdzvConf", "FIELD: rdzvConf <[]Object>", "key\t<string>"),
        ("tfjob.spec.runPolicy.schedulingPolicy.minAvailable", "FIELD: minAvailable <integer>", "at once"),
        ("tfjob.spec.tfReplicaSpecs.template.spec", "FIELD: spec <Object>", "PodSpec"),
        ("tensorflowtrainingjob.spec.replicaSpecs", "FIELD: replicaSpecs <[]Object>", "type\t<string>"),
        ("tensorflowtrainingjob.spec.scheduler.t9kScheduler.queue", "FIELD: queue <string>", "quota leaf"),
        ("tensorflowtrainingjob.spec.runMode.pause.resumeSpecs", "<[]ReplicaMode>", "skipInitContainer"),
        ("configmap.binaryData", "FIELD: binaryData <map[string]string>", "base64"),
        ("secret.stringData", "FIELD: stringData <map[string]string>", "write-only"),
        ("service.spec.ports.port", "FIELD: port <integer>", "exposed by this service"),
        ("clusterpropagationpolicy.spec.failover.application.purgeMode", "<string>", "Gracefully"),
        ("selfsubjectaccessreview.spec.resourceAttributes.verb", "FIELD: verb <string>", "deletecollection"),
        ("selfsubjectrulesreview.status.resourceRules", "<[]ResourceRule>", "apiGroups"),
        ("selfsubjectreview.status.userInfo.groups", "FIELD: groups <[]string>", "system:authenticated"),
    ],
)
def test_explain_at_depth(kubectl: Kubectl, path: str, kind: str, says: str) -> None:
    out = kubectl("explain", path).stdout
    assert kind in out
    assert says in out


@pytest.mark.parametrize(
    ("api_version", "path", "field", "says"),
    [
        (
            "kubeflow.org/v2beta1",
            "mpijobs.spec.slotsPerWorker",
            "FIELD: slotsPerWorker <integer>",
            "hostfile",
        ),
        ("kubeflow.org/v2beta1", "mpijobs.spec.mpiReplicaSpecs", "<map[string]ReplicaSpec>", "Launcher"),
        ("batch.tensorstack.dev/v1beta1", "mpijobs.spec.worker.cmd", "FIELD: cmd <[]string>", "mpirun"),
        ("batch.tensorstack.dev/v1beta1", "mpijobs.spec.mca", "FIELD: mca <map[string]string>", "MCA"),
        (
            "batch.tensorstack.dev/v1beta1",
            "mpijobs.spec.mpiConfig.script",
            "FIELD: script <[]string>",
            "required",
        ),
    ],
)
def test_the_two_mpijobs_are_explained_each_by_its_group(
    kubectl: Kubectl, api_version: str, path: str, field: str, says: str
) -> None:
    """Kubeflow's and T9k's MPIJob share a name, not their fields: each group's is its own."""
    out = kubectl("explain", path, f"--api-version={api_version}").stdout
    assert f"GROUP:      {api_version.split('/', maxsplit=1)[0]}" in out
    assert field in out
    assert says in out


def test_every_served_kind_is_explained(kubectl: Kubectl) -> None:
    for rt in fleet_registry():
        # By --api-version: ``jobs.batch.volcano.sh`` would read as ``jobs.batch`` and a field path.
        out = kubectl("explain", rt.plural, f"--api-version={rt.api_version}").stdout
        assert f"KIND:       {rt.kind}" in out
        assert "DESCRIPTION:" in out


def typed_fields(
    schemas: dict[str, Any], name: str, prefix: str = "", depth: int = 0
) -> Iterator[tuple[str, str]]:
    """Every (dotted path, type) of a scalar field the served schema declares, maps and arrays
    stepped into with a sample key ``k`` and index 0."""
    schema = schemas[name] if isinstance(name, str) else name
    if depth > 6:
        return
    if "$ref" in schema:
        yield from typed_fields(schemas, schema["$ref"].rsplit("/", 1)[-1], prefix, depth + 1)
        return
    kind = schema.get("type")
    if kind in ("integer", "boolean", "number") or (kind == "string" and prefix):
        yield prefix, kind
    for key, child in (schema.get("properties") or {}).items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            yield from typed_fields(schemas, child, f"{prefix}.{key}" if prefix else key, depth + 1)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from typed_fields(schemas, schema["additionalProperties"], f"{prefix}.k", depth + 1)
    if isinstance(schema.get("items"), dict):
        yield from typed_fields(schemas, schema["items"], f"{prefix}[0]", depth + 1)


def put(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` (``a.b[0].c``) in ``obj``, creating what is missing."""
    parts: list[str | int] = []
    for part in path.split("."):
        name, _, index = part.partition("[")
        parts.append(name)
        if index:
            parts.append(int(index.rstrip("]")))
    node: Any = obj
    for here, after in itertools.pairwise(parts):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(here, int):
            while len(node) <= here:
                node.append(copy.deepcopy(empty))
            if not isinstance(node[here], dict | list):
                node[here] = empty
            node = node[here]
        else:
            if not isinstance(node.get(here), dict | list):
                node[here] = empty
            node = node[here]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value


#: The repository's own samples, for the kinds without one in /work/shared/samples.
REPO_SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"

SAMPLES = {
    "ascendjobs": ("/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs", JOB),
    "propagationpolicies": (
        "/apis/policy.one.alibabacloud.com/v1alpha1/namespaces/default/propagationpolicies",
        POLICIES[0],
    ),
    "elasticquotatrees": (
        "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees",
        TREE,
    ),
    "pytorchjobs": ("/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", REPO_SAMPLES / "pytorchjob.yaml"),
    "tfjobs": ("/apis/kubeflow.org/v1/namespaces/default/tfjobs", REPO_SAMPLES / "tfjob.yaml"),
    "mpijobs": (
        "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs",
        REPO_SAMPLES / "mpijob-kubeflow.yaml",
    ),
    "tensorflowtrainingjobs": (
        "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/tensorflowtrainingjobs",
        REPO_SAMPLES / "t9k-tensorflowtrainingjob.yaml",
    ),
    "t9k-mpijobs": (
        "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/mpijobs",
        REPO_SAMPLES / "t9k-mpijob.yaml",
    ),
    "configmaps": ("/api/v1/namespaces/default/configmaps", None),
    "services": ("/api/v1/namespaces/default/services", None),
}
#: The companions as a job's manifest writes them (the first documents of this sample).
COMPANIONS = {
    doc["kind"].lower() + "s": doc
    for doc in yaml.safe_load_all((REPO_SAMPLES / "ascend" / "pytorch-with-companions.yaml").read_text())
    if doc and doc.get("kind") in ("ConfigMap", "Service")
}


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_every_typed_field_the_openapi_serves_is_enforced(fleet_api: FleetApiThread, plural: str) -> None:
    """Walk the served OpenAPI v3 document: each scalar field, given a value of the wrong type,
    is refused (422) naming that field; the sample itself passes."""
    collection, sample = SAMPLES[plural]
    group_version = collection.split("/namespaces/")[0].removeprefix("/")
    code, document = call(fleet_api, "GET", f"/openapi/v3/{group_version}")
    assert code == 200
    schemas = document["components"]["schemas"]
    [root] = [
        n
        for n, s in schemas.items()
        if any(g.get("kind") for g in s.get("x-kubernetes-group-version-kind", []))
        and n.rsplit(".", 1)[-1].lower() + "s" == plural.replace("policies", "policys").removeprefix("t9k-")
    ]
    base = COMPANIONS[plural] if sample is None else yaml.safe_load(sample.read_text())
    base["metadata"]["namespace"] = base["metadata"].get("namespace", "default")
    assert call(fleet_api, "POST", f"{collection}?dryRun=All", base)[0] == 201
    fields = list(typed_fields(schemas, root))
    assert len(fields) >= {"ascendjobs": 10, "propagationpolicies": 10, "pytorchjobs": 20}.get(plural, 3)
    for path, kind in fields:
        obj = copy.deepcopy(base)
        wrong: Any = {"wrong": True} if kind == "string" else "wrong"
        put(obj, path, wrong)
        code, answer = call(fleet_api, "POST", f"{collection}?dryRun=All", obj)
        assert code == 422, (path, answer)
        causes = [c["field"] for c in answer["details"]["causes"]]
        assert path in causes, (path, json.dumps(answer)[:400])


def test_every_kind_the_fleet_serves_has_a_schema() -> None:
    assert [rt.kind for rt in fleet_registry() if rt.schema is None] == []
    by_group = {(rt.group, rt.kind): rt.schema for rt in fleet_registry()}
    kubeflow, t9k = by_group[("kubeflow.org", "MPIJob")], by_group[("batch.tensorstack.dev", "MPIJob")]
    assert kubeflow is not None and "mpiReplicaSpecs" in kubeflow["properties"]["spec"]["properties"]
    assert t9k is not None and "worker" in t9k["properties"]["spec"]["properties"]


def test_a_review_of_the_wrong_shape_is_refused_by_its_schema(fleet_api: FleetApiThread) -> None:
    """The self reviews are validated by the schema ``kubectl explain`` shows, before an answer."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": ["get"], "resource": "pytorchjobs"}},
    }
    code, answer = call(fleet_api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    assert code == 422, answer
    [cause] = answer["details"]["causes"]
    assert cause["field"] == "spec.resourceAttributes.verb"
    assert "in body must be of type string" in cause["message"]


def _sample_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    shared = Path("/work/shared/samples")
    files = sorted(REPO_SAMPLES.rglob("*.yaml")) + (sorted(shared.glob("*.yaml")) if shared.is_dir() else [])
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
                yield f"{path.name}:{doc['kind']}", doc


def test_every_sample_document_conforms_to_its_kinds_schema() -> None:
    """The schema never refuses what is written the way upstream users write it: every document
    of every sample (multi-document files too) passes its kind's schema."""
    schemas = {(rt.api_version, rt.kind): rt.schema for rt in fleet_registry()}
    seen = set()
    for name, doc in _sample_documents():
        schema = schemas[(doc["apiVersion"], doc["kind"])]
        assert schema is not None, name
        assert schema_causes(schema, doc) == [], name
        seen.add(doc["kind"])
    assert {
        "PyTorchJob",
        "TFJob",
        "MPIJob",
        "TensorFlowTrainingJob",
        "ConfigMap",
        "Secret",
        "Service",
    } <= seen


@pytest.mark.parametrize(
    ("sample", "field", "wrong"),
    [
        ("pytorchjob.yaml", "spec.runPolicy.backoffLimit", "three"),
        ("tfjob.yaml", "spec.tfReplicaSpecs.Worker.replicas", "two"),
        ("mpijob-kubeflow.yaml", "spec.slotsPerWorker", "eight"),
        ("t9k-mpijob.yaml", "spec.worker.replicas", "five"),
        ("t9k-mpijob-replicaspecs.yaml", "spec.replicaSpecs[0].replicas", "two"),
        ("t9k-tensorflowtrainingjob.yaml", "spec.replicaSpecs[0].replicas", "four"),
    ],
)
def test_a_type_error_is_refused_as_a_crd_refuses_it(
    kubectl: Kubectl, tmp_path: Path, sample: str, field: str, wrong: str
) -> None:
    """kubectl apply of a job with a field of the wrong type: the words kube-apiserver gives for
    a CRD's schema, as for AscendJob."""
    doc = yaml.safe_load((REPO_SAMPLES / sample).read_text())
    put(doc, field, wrong)
    manifest = tmp_path / sample
    manifest.write_text(yaml.safe_dump(doc))
    done = kubectl("apply", "--validate=strict", "-n", "default", "-f", str(manifest), ok=False)
    assert done.returncode != 0
    name = doc["metadata"]["name"]
    assert (
        f'The {doc["kind"]} "{name}" is invalid: {field}: Invalid value: "string": '
        f'{field} in body must be of type integer: "{wrong}"'
    ) in done.stderr


def test_a_wrong_secret_value_is_refused_without_quoting_it(kubectl: Kubectl) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"token": 12345}}
    done = kubectl("apply", "-n", "default", "-f", "-", ok=False, stdin=json.dumps(secret))
    assert done.returncode != 0
    assert 'data.token: Invalid value: "integer": data.token in body must be of type string' in done.stderr
    assert "12345" not in done.stderr


@pytest.mark.parametrize(
    ("api_version", "path", "field", "says"),
    [
        ("batch.volcano.sh/v1alpha1", "jobs.spec.tasks", "FIELD: tasks <[]TaskSpec>", "<job>-<task>-<index>"),
        ("batch.volcano.sh/v1alpha1", "jobs.spec.policies.action", "FIELD: action <string>", "RestartJob"),
        ("batch/v1", "jobs.spec.parallelism", "FIELD: parallelism <integer>", "Kueue"),
        ("batch/v1", "jobs.spec.suspend", "FIELD: suspend <boolean>", "kueue.x-k8s.io/queue-name"),
    ],
)
def test_the_two_jobs_are_explained_each_by_its_group(
    kubectl: Kubectl, api_version: str, path: str, field: str, says: str
) -> None:
    """Volcano's and Kubernetes' Job share a name, not their fields."""
    out = kubectl("explain", path, f"--api-version={api_version}").stdout
    assert field in out, out
    assert says in out, out
