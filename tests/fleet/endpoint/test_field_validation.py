"""Unknown and duplicate fields at the fleet, as the Kubernetes API server treats them.

The real kubectl with ``--validate=strict`` (its default: ``fieldValidation=Strict``), ``warn``
and ``false`` (``Ignore``), a field unknown deep inside each kind's schema; plain HTTP for the
exact ``Status`` (the wording of ``test/integration/apiserver/field_validation_test.go`` in
kubernetes/kubernetes) and for the Warning headers; a refused request leaves the store as it
was. Kubernetes' own kinds (PriorityClass, ConfigMap, Service) follow their typed decoding, the
custom kinds their schema's pruning, Karmada's known fields keep their Warning
(``test_validation.py``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pytest
import redis
import yaml

from fleet.state import Objects
from tests.fleet.endpoint.conftest import JOB, JOB_NAME, JOBS, POLICIES, SAMPLES, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration


def keyspace(client: redis.Redis) -> dict[Any, Any]:
    return {key: client.dump(key) for key in sorted(client.keys("*"))}


def put(obj: dict[str, Any], path: list[Any], value: Any) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def job() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(JOB.read_text())
    return loaded


def sample(name: str) -> Callable[[], dict[str, Any]]:
    def read() -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
        return loaded

    return read


@dataclass(frozen=True)
class Case:
    make: Callable[[], dict[str, Any]]
    #: Where the unknown field goes (the last key is its name, or ``metadata`` for a new one).
    where: list[Any]
    #: The path the API server names.
    path: str
    #: How kubectl names the kind in its output.
    kind: str


#: For each kind, a manifest as its users write it, where to put an unknown field deep inside
#: it, the path the API server names, and how kubectl names the kind.
CASES: Final = {
    "acjob-container": Case(
        job,
        ["spec", "replicaSpecs", "Worker", "template", "spec", "containers", 0, "resource"],
        "spec.replicaSpecs.Worker.template.spec.containers[0].resource",
        "ascendjob.mindxdl.gitee.com",
    ),
    "pytorchjob-template-metadata": Case(
        sample("pytorchjob.yaml"),
        ["spec", "pytorchReplicaSpecs", "Worker", "template", "metadata"],
        "spec.pytorchReplicaSpecs.Worker.template.metadata.labelz",
        "pytorchjob.kubeflow.org",
    ),
    "t9k-affinity": Case(
        sample("t9k-tensorflowtrainingjob.yaml"),
        ["spec", "replicaSpecs", 0, "template", "spec", "afinity"],
        "spec.replicaSpecs[0].template.spec.afinity",
        "tensorflowtrainingjob.batch.tensorstack.dev",
    ),
    "policy-failover": Case(
        sample(POLICIES[0].name),
        ["spec", "failover", "application", "decisionConditions", "tolerationSecond"],
        "spec.failover.application.decisionConditions.tolerationSecond",
        "propagationpolicy.policy.one.alibabacloud.com",
    ),
    "priorityclass": Case(
        lambda: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {}, "value": 10},
        ["preemtionPolicy"],
        "preemtionPolicy",
        "priorityclass.scheduling.k8s.io",
    ),
    "service-port": Case(
        lambda: {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"namespace": "default"},
            "spec": {"clusterIP": "None", "ports": [{"port": 2222}], "selector": {"job": "x"}},
        },
        ["spec", "ports", 0, "targetPorts"],
        "spec.ports[0].targetPorts",
        "service",
    ),
}


def manifest(case: str, name: str) -> tuple[dict[str, Any], str]:
    make, where, path = CASES[case].make, CASES[case].where, CASES[case].path
    obj = make()
    obj["metadata"]["name"] = name
    if where[-1] == "metadata":  # the template has no metadata yet: give it one with a typo
        put(obj, where, {"labelz": {"team": "a"}})
    else:
        put(obj, where, 1)
    return obj, path


def leaf(obj: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (``a.b[0].c``), or ``None`` when any part is missing."""
    node: Any = obj
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            index = int(part[1:-1])
            node = node[index] if isinstance(node, list) and len(node) > index else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


@pytest.mark.parametrize("case", sorted(CASES))
def test_kubectl_validate_strict_warn_and_false_at_depth(
    kubectl: Kubectl, fleet_redis: redis.Redis, case: str
) -> None:
    kind = CASES[case].kind
    # strict (kubectl's default): refused as the API server refuses it, nothing stored.
    obj, path = manifest(case, "strict")
    before = keyspace(fleet_redis)
    refused = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj), ok=False)
    assert refused.returncode == 1
    kind_name = obj["kind"]
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    assert refused.stderr.strip().endswith(
        f'{kind_name} in version "{version}" cannot be handled as a {kind_name}: '
        f'strict decoding error: unknown field "{path}"'
    ), refused.stderr
    assert "Error from server (BadRequest)" in refused.stderr
    assert keyspace(fleet_redis) == before
    # warn: stored without the field, with kubectl's Warning line.
    obj, _ = manifest(case, "warn")
    warned = kubectl("apply", "-f", "-", "--validate=warn", stdin=yaml.safe_dump(obj))
    assert warned.stdout.strip() == f"{kind}/warn created"
    assert warned.stderr.splitlines() == [f'Warning: unknown field "{path}"']
    namespace = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
    stored = json.loads(kubectl("get", kind, "warn", *namespace, "-o", "json").stdout)
    assert leaf(stored, path) is None
    # false: stored without the field, silently.
    obj, _ = manifest(case, "ignored")
    ignored = kubectl("apply", "-f", "-", "--validate=false", stdin=yaml.safe_dump(obj))
    assert (ignored.stdout.strip(), ignored.stderr) == (f"{kind}/ignored created", "")
    stored = json.loads(kubectl("get", kind, "ignored", *namespace, "-o", "json").stdout)
    assert leaf(stored, path) is None


def raw_call(
    server: FleetApiThread, method: str, path: str, body: bytes, content_type: str
) -> tuple[int, Any, list[str]]:
    """A request with a body as given: status, decoded answer and its Warning headers."""
    request = urllib.request.Request(
        server.url + path, data=body, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), response.headers.get_all("Warning") or []
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read()), error.headers.get_all("Warning") or []


COLLECTION: Final = f"{JOBS}/namespaces/default/ascendjobs"

#: An AscendJob body with a repeated key, an unknown metadata field and unknown fields at
#: several depths, written by hand so that the keys repeat (a dict cannot).
BAD_JOB: Final = (
    json.dumps(job())
    .replace('"metadata": {', '"metadata": {"labelz": {"a": "b"}, ', 1)
    .replace('"spec": {', '"spec": {"zeta": 1, "alpha": 2, "runPolicy": {}, ', 1)
    .replace('"replicas": 1,', '"replicas": 1, "replicaz": 2,', 1)
)


def test_a_strict_refusal_is_the_api_servers_status_and_changes_nothing(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    before = keyspace(fleet_redis)
    code, status, warnings = raw_call(
        fleet_api, "POST", f"{COLLECTION}?fieldValidation=Strict", BAD_JOB.encode(), "application/json"
    )
    assert code == 400
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        # As a custom resource is decoded: the body's repeated keys, metadata's unknown fields,
        # then the others sorted by path.
        "message": 'AscendJob in version "v1" cannot be handled as a AscendJob: strict decoding error: '
        'duplicate field "spec.runPolicy", unknown field "metadata.labelz", unknown field "spec.alpha", '
        'unknown field "spec.replicaSpecs.Master.replicaz", unknown field "spec.zeta"',
        "reason": "BadRequest",
        "code": 400,
    }
    assert warnings == []
    assert keyspace(fleet_redis) == before


def test_warn_is_the_default_and_every_finding_is_a_warning_header(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    code, stored, warnings = raw_call(fleet_api, "POST", COLLECTION, BAD_JOB.encode(), "application/json")
    assert code == 201
    assert warnings == [
        '299 - "duplicate field \\"spec.runPolicy\\""',
        '299 - "unknown field \\"metadata.labelz\\""',
        '299 - "unknown field \\"spec.alpha\\""',
        '299 - "unknown field \\"spec.replicaSpecs.Master.replicaz\\""',
        '299 - "unknown field \\"spec.zeta\\""',
    ]
    [kept] = Objects(fleet_redis).list(FLEET_ASCENDJOB, "default")[0]
    assert kept["spec"]["runPolicy"] == job()["spec"]["runPolicy"]  # the last of the two wins
    assert {"zeta", "alpha"}.isdisjoint(kept["spec"])
    assert "labelz" not in kept["metadata"]
    assert "replicaz" not in kept["spec"]["replicaSpecs"]["Master"]
    assert stored["metadata"]["name"] == JOB_NAME


def test_ignore_drops_unknown_fields_silently(fleet_api: FleetApiThread, fleet_redis: redis.Redis) -> None:
    code, stored, warnings = raw_call(
        fleet_api, "POST", f"{COLLECTION}?fieldValidation=Ignore", BAD_JOB.encode(), "application/json"
    )
    assert (code, warnings) == (201, [])
    assert "zeta" not in stored["spec"] and "labelz" not in stored["metadata"]


def test_an_unsupported_directive_is_a_bad_request(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    before = keyspace(fleet_redis)
    code, status = call(fleet_api, "POST", f"{COLLECTION}?fieldValidation=strict", job())
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'fieldValidation: Unsupported value: "strict": supported values: "Ignore", "Strict", "Warn"'
    )
    assert keyspace(fleet_redis) == before


def yaml_with_repeated_keys() -> tuple[bytes, int, int]:
    """The AscendJob sample as YAML with two keys written twice (as a hand-edited file has
    them), and the lines of the second writing of each."""
    lines = JOB.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  schedulerName:"))
    lines.insert(first + 1, "  schedulerName: volcano")
    second = next(i for i, line in enumerate(lines) if line.strip().startswith("imagePullPolicy:"))
    lines.insert(second + 1, "            imagePullPolicy: Always")
    return "\n".join(lines).encode(), first + 2, second + 2


def test_a_yaml_body_reports_its_repeated_keys_as_go_yaml_does(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    body, scheduler, pull = yaml_with_repeated_keys()
    before = keyspace(fleet_redis)
    code, status, _ = raw_call(
        fleet_api, "POST", f"{COLLECTION}?fieldValidation=Strict", body, "application/yaml"
    )
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'AscendJob in version "v1" cannot be handled as a AscendJob: strict decoding error: '
        "yaml: unmarshal errors:\n"
        f'  line {scheduler}: key "schedulerName" already set in map\n'
        f'  line {pull}: key "imagePullPolicy" already set in map'
    )
    assert keyspace(fleet_redis) == before
    code, stored, warnings = raw_call(fleet_api, "POST", COLLECTION, body, "application/yaml")
    assert code == 201, stored
    assert warnings == [
        f'299 - "line {scheduler}: key \\"schedulerName\\" already set in map"',
        f'299 - "line {pull}: key \\"imagePullPolicy\\" already set in map"',
    ]
    container = stored["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "Always"  # the last one written, as YAMLToJSON keeps it


def created(server: FleetApiThread) -> dict[str, Any]:
    code, obj = call(server, "POST", COLLECTION, job())
    assert code == 201, obj
    assert isinstance(obj, dict)
    return obj


def test_a_strict_merge_patch_is_refused_as_invalid_and_changes_nothing(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    version = created(fleet_api)["metadata"]["resourceVersion"]
    patch = (
        b'{"spec": {"replicaSpecs": {"Master": {"replicaz": 2}}, "schedulerName": "a", "schedulerName": "b"}}'
    )
    code, status, _ = raw_call(
        fleet_api,
        "PATCH",
        f"{COLLECTION}/{JOB_NAME}?fieldValidation=Strict",
        patch,
        "application/merge-patch+json",
    )
    assert (code, status["reason"]) == (422, "Invalid")
    findings = (
        'strict decoding error: duplicate field "spec.schedulerName", '
        'unknown field "spec.replicaSpecs.Master.replicaz"'
    )
    [cause] = status["details"]["causes"]
    assert cause["field"] == "patch" and cause["reason"] == "FieldValueInvalid"
    # The value shown is the patched object, as JSON (Go's %q of it).
    assert cause["message"].startswith('Invalid value: "{\\"apiVersion\\":\\"mindxdl.gitee.com/v1\\"')
    assert cause["message"].endswith(f": {findings}")
    assert status["message"] == f' "" is invalid: patch: {cause["message"]}'
    assert call(fleet_api, "GET", f"{COLLECTION}/{JOB_NAME}")[1]["metadata"]["resourceVersion"] == version


def test_a_json_patch_names_its_own_unknown_and_repeated_fields(fleet_api: FleetApiThread) -> None:
    created(fleet_api)
    patch = (
        b'[{"op": "add", "path": "/spec/zz", "value": 1, "valeu": 2},'
        b' {"op": "add", "path": "/a", "path": "/spec/yy", "value": 1}]'
    )
    path = f"{COLLECTION}/{JOB_NAME}?fieldValidation=Warn"
    code, _, warnings = raw_call(fleet_api, "PATCH", path, patch, "application/json-patch+json")
    assert code == 200
    assert warnings == [
        '299 - "json patch unknown field \\"[0].valeu\\""',
        '299 - "json patch duplicate field \\"[1].path\\""',
        '299 - "unknown field \\"spec.yy\\""',
        '299 - "unknown field \\"spec.zz\\""',
    ]


def test_kubectl_apply_to_an_existing_job_refuses_the_unknown_field_of_its_patch(
    kubectl: Kubectl, fleet_api: FleetApiThread
) -> None:
    kubectl("apply", "-f", str(JOB))
    before = call(fleet_api, "GET", f"{COLLECTION}/{JOB_NAME}")[1]["metadata"]["resourceVersion"]
    changed = job()
    changed["spec"]["runPolicy"]["schedulingPolicy"]["minAvailabel"] = 2
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(changed), ok=False)
    assert done.returncode == 1
    assert done.stderr.startswith("The request is invalid: patch: Invalid value: ")
    assert done.stderr.strip().endswith(
        'strict decoding error: unknown field "spec.runPolicy.schedulingPolicy.minAvailabel"'
    )
    assert call(fleet_api, "GET", f"{COLLECTION}/{JOB_NAME}")[1]["metadata"]["resourceVersion"] == before


@pytest.mark.parametrize("validate", ["strict", "false"])
def test_server_side_apply_refuses_an_unknown_field_whatever_the_directive(
    kubectl: Kubectl, fleet_redis: redis.Redis, validate: str
) -> None:
    """structured-merge-diff refuses it before merging; 400 with its words (Kubernetes answers
    500, see fleet.apiserver.fields)."""
    changed = job()
    changed["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resource"] = {}
    before = keyspace(fleet_redis)
    done = kubectl(
        "apply", "--server-side", f"--validate={validate}", "-f", "-", stdin=yaml.safe_dump(changed), ok=False
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error from server (BadRequest): failed to create typed patch object "
        f"(default/{JOB_NAME}; mindxdl.gitee.com/v1, Kind=AscendJob): "
        ".spec.replicaSpecs.Worker.template.spec.containers[0].resource: field not declared in schema"
    )
    assert keyspace(fleet_redis) == before


def test_a_secret_value_is_never_shown_in_a_refused_patch(fleet_api: FleetApiThread) -> None:
    secrets = "/api/v1/namespaces/default/secrets"
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "hunter2"}}
    assert call(fleet_api, "POST", secrets, body)[0] == 201
    code, status, _ = raw_call(
        fleet_api,
        "PATCH",
        f"{secrets}/s?fieldValidation=Strict",
        b'{"dta": {"x": "eQ=="}}',
        "application/merge-patch+json",
    )
    assert (code, status["reason"]) == (422, "Invalid")
    assert 'strict decoding error: unknown field "dta"' in status["message"]
    assert "<redacted>" in status["message"]
    assert "aHVudGVyMg==" not in status["message"] and "hunter2" not in status["message"]


def test_a_strategic_patch_of_a_builtin_kind_shows_the_patch_as_go_prints_it(
    fleet_api: FleetApiThread,
) -> None:
    configmaps = "/api/v1/namespaces/default/configmaps"
    assert call(fleet_api, "POST", configmaps, {"metadata": {"name": "c"}, "data": {"a": "b"}})[0] == 201
    code, status, _ = raw_call(
        fleet_api,
        "PATCH",
        f"{configmaps}/c?fieldValidation=Strict",
        b'{"data": {"a": "c"}, "extra": {"n": 1.5, "on": true}}',
        "application/strategic-merge-patch+json",
    )
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"][0]["message"] == (
        'Invalid value: "map[data:map[a:c] extra:map[n:1.5 on:true]]": '
        'strict decoding error: unknown field "extra"'
    )


def test_kubectl_patch_sends_no_directive_so_the_default_warns(
    kubectl: Kubectl, fleet_api: FleetApiThread
) -> None:
    created(fleet_api)
    done = kubectl("patch", "acjob", JOB_NAME, "--type=merge", "-p", '{"spec": {"scheduler": "volcano"}}')
    assert done.stdout.startswith(f"ascendjob.mindxdl.gitee.com/{JOB_NAME} patched")
    assert done.stderr.splitlines() == ['Warning: unknown field "spec.scheduler"']
    assert "scheduler" not in call(fleet_api, "GET", f"{COLLECTION}/{JOB_NAME}")[1]["spec"]


def test_the_quota_tree_refuses_a_misspelt_node_field(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    tree = yaml.safe_load(TREE.read_text())
    tree["spec"]["root"]["children"][0]["mxa"] = {"cpu": 1}
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(tree), ok=False)
    assert 'strict decoding error: unknown field "spec.root.children[0].mxa"' in done.stderr
    assert keyspace(fleet_redis) == {}


def test_a_template_of_the_kubectl_default_output_is_accepted(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    """What kubectl writes for a pod template (``creationTimestamp: null``, ``resources: {}``)
    passes: a null the schema does not allow is dropped, as the API server drops it."""
    obj = job()
    template = obj["spec"]["replicaSpecs"]["Master"]["template"]
    template.setdefault("metadata", {})["creationTimestamp"] = None
    template["spec"]["containers"][0]["env"] = None
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert done.stderr == ""
    stored = json.loads(kubectl("get", "acjob", JOB_NAME, "-o", "json").stdout)
    assert "env" not in stored["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]


def test_a_field_stored_before_the_schema_knew_it_does_not_fail_a_strict_patch(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    """An object stored with a field its schema now calls unknown (written before the schema
    knew better) can still be patched: the field the patch did not touch is kept as stored
    (a job's spec may not change) and not reported; what strict decoding reports is the
    patch's doing alone."""
    legacy = job()
    legacy["metadata"]["namespace"] = "default"
    legacy["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["legacyField"] = 1
    Objects(fleet_redis).create(FLEET_ASCENDJOB, legacy)
    code, patched, warnings = raw_call(
        fleet_api,
        "PATCH",
        f"{COLLECTION}/{JOB_NAME}?fieldValidation=Strict",
        b'{"metadata": {"labels": {"team": "nlp"}}}',
        "application/merge-patch+json",
    )
    assert (code, warnings) == (200, []), patched["message"]
    assert patched["metadata"]["labels"]["team"] == "nlp"
    container = patched["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["legacyField"] == 1
    refused = raw_call(
        fleet_api,
        "PATCH",
        f"{COLLECTION}/{JOB_NAME}?fieldValidation=Strict",
        b'{"metadata": {"labels": {"team": "cv"}}, "spec": {"newField": 1}}',
        "application/merge-patch+json",
    )[1]
    assert refused["details"]["causes"][0]["message"].endswith(
        'strict decoding error: unknown field "spec.newField"'
    )


@pytest.mark.parametrize("verb", ["create", "replace"])
def test_kubectl_create_and_replace_validate_as_apply_does(
    kubectl: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis, verb: str
) -> None:
    if verb == "replace":
        created(fleet_api)
    changed = job()
    changed["spec"]["runPolicy"]["schedulingPolicy"]["minAvailabel"] = 2
    if verb == "replace":  # as read back from the fleet: Fleet's finalizer is not the file's to drop
        changed["metadata"]["finalizers"] = ["fleet.io/dispatch"]
    before = keyspace(fleet_redis)
    refused = kubectl(verb, "-f", "-", stdin=yaml.safe_dump(changed), ok=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        'strict decoding error: unknown field "spec.runPolicy.schedulingPolicy.minAvailabel"'
    )
    assert keyspace(fleet_redis) == before
    warned = kubectl(verb, "-f", "-", "--validate=warn", stdin=yaml.safe_dump(changed), ok=False)
    assert 'Warning: unknown field "spec.runPolicy.schedulingPolicy.minAvailabel"' in warned.stderr
