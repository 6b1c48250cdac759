"""PriorityClass at the fleet through the real kubectl, and the priority of the jobs that name one.

The classes are written as Kubernetes users write them (the example of the Kubernetes docs, the
two classes of MindCluster's preemption guide); the API answers as kube-apiserver does: its
columns, its validation and its words, each refusal a Status naming the field. A job's
``spec.runPolicy.schedulingPolicy.priorityClass`` is resolved at submission; no dispatcher runs
here, so what the tests read is what the API itself wrote (the ledger's record, the job's status).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import redis
import yaml

from fleet.jobs.submit import enqueue
from fleet.kinds import FLEET_EVENT, PRIORITY_CLASS
from fleet.state import Objects
from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, JOB_NAME, JOBS, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
FIELD = "spec.runPolicy.schedulingPolicy.priorityClass"

#: The example of the Kubernetes docs (Pod Priority and Preemption).
HIGH_PRIORITY = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
description: "This priority class should be used for XYZ service pods only."
"""

#: MindCluster's preemption guide (tidal scheduling): inference preempts, training does not.
MINDCLUSTER = """\
# 推理任务：高优先级，可抢占低优先级资源
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: inference-high
value: 1000
preemptionPolicy: PreemptLowerPriority
globalDefault: false
description: "推理任务高优先级"
---
# 训练任务：低优先级，可被抢占
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: training-low
value: 100
globalDefault: false
preemptionPolicy: Never
description: "训练任务低优先级，可被抢占"
"""


def klass(name: str, value: int, *, default: bool = False, policy: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def job(name: str = JOB_NAME, *, priority_class: str | None = None, annotation: str | None = None) -> Any:
    obj: dict[str, Any] = yaml.safe_load(JOB.read_text())
    obj["metadata"]["name"] = name
    if priority_class is not None:
        obj["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = priority_class
    if annotation is not None:
        obj["metadata"].setdefault("annotations", {})["fleet.io/priority"] = annotation
    return obj


def queued(client: redis.Redis, name: str) -> int:
    record = Ledger(client).pending.record(f"default/{name}")
    assert record is not None, f"{name} is not queued"
    return record.priority


def priority_status(client: redis.Redis, name: str) -> dict[str, Any]:
    status = Objects(client).get(FLEET_ASCENDJOB, "default", name)["status"]
    return {k: status.get(k) for k in ("priority", "priorityClassName", "preemptionPolicy")}


def causes(status: dict[str, Any]) -> list[str]:
    return [cause["field"] for cause in status["details"].get("causes", [])]


@pytest.fixture
def with_tree(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-f", str(TREE))
    return kubectl


# --- the kind ------------------------------------------------------------------------------------


def test_apply_get_describe_delete_as_kubernetes_users_write_them(kubectl: Kubectl) -> None:
    created = kubectl("apply", "-f", "-", stdin=HIGH_PRIORITY)
    assert created.stdout.strip() == "priorityclass.scheduling.k8s.io/high-priority created"
    again = kubectl("apply", "-f", "-", stdin=HIGH_PRIORITY)
    assert again.stdout.strip() == "priorityclass.scheduling.k8s.io/high-priority unchanged"
    both = kubectl("apply", "-f", "-", stdin=MINDCLUSTER)
    assert both.stdout.split() == [
        "priorityclass.scheduling.k8s.io/inference-high",
        "created",
        "priorityclass.scheduling.k8s.io/training-low",
        "created",
    ]
    rows = table(kubectl("get", "priorityclass").stdout)
    assert rows[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert [row[:3] + row[4:] for row in rows[1:]] == [
        ["high-priority", "1000000", "false", "PreemptLowerPriority"],
        ["inference-high", "1000", "false", "PreemptLowerPriority"],
        ["training-low", "100", "false", "Never"],
    ]
    assert kubectl("get", "pc", "training-low", "-o", "jsonpath={.value} {.preemptionPolicy}").stdout == (
        "100 Never"
    )
    # a changed description is an ordinary update
    changed = kubectl("apply", "-f", "-", stdin=HIGH_PRIORITY.replace("XYZ", "ABC"))
    assert changed.stdout.strip() == "priorityclass.scheduling.k8s.io/high-priority configured"
    described = kubectl("describe", "priorityclass", "high-priority").stdout
    for line in (
        "Name:              high-priority",
        "Value:             1000000",
        "GlobalDefault:     false",
        "PreemptionPolicy:  PreemptLowerPriority",
        "Description:       This priority class should be used for ABC service pods only.",
    ):
        assert line in described
    resources = table(kubectl("api-resources", "--api-group=scheduling.k8s.io").stdout)
    assert resources[1] == ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false", "PriorityClass"]
    deleted = kubectl("delete", "priorityclass", "high-priority")
    assert deleted.stdout.strip() == 'priorityclass.scheduling.k8s.io "high-priority" deleted'
    assert [row[0] for row in table(kubectl("get", "pc").stdout)[1:]] == ["inference-high", "training-low"]


def test_kubectl_create_priorityclass(kubectl: Kubectl, fleet_api: FleetApiThread) -> None:
    """``kubectl create priorityclass`` sends the class as Kubernetes protobuf: read as the JSON
    it stands for, every flag kept, and refused as the JSON would be."""
    done = kubectl(
        "create", "priorityclass", "urgent", "--value=100000", "--preemption-policy=Never",
        "--description=inference first",
    )  # fmt: skip
    assert done.stdout.strip() == "priorityclass.scheduling.k8s.io/urgent created"
    kubectl("create", "priorityclass", "batch", "--value=-5", "--global-default")
    kubectl("create", "priorityclass", "zero", "--value=0")
    rows = {row[0]: row for row in table(kubectl("get", "pc").stdout)[1:]}
    assert [rows["urgent"][1], rows["urgent"][2], rows["urgent"][4]] == ["100000", "false", "Never"]
    assert [rows["batch"][1], rows["batch"][2], rows["batch"][4]] == ["-5", "true", "PreemptLowerPriority"]
    zero = call(fleet_api, "GET", f"{CLASSES}/zero")[1]
    assert (zero["value"], zero["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert call(fleet_api, "GET", f"{CLASSES}/urgent")[1]["description"] == "inference first"
    dry = kubectl("create", "priorityclass", "dry", "--value=1", "--dry-run=server")
    assert dry.stdout.strip() == "priorityclass.scheduling.k8s.io/dry created (server dry run)"
    assert call(fleet_api, "GET", f"{CLASSES}/dry")[0] == 404
    refused = kubectl("create", "priorityclass", "too-high", "--value=1000000001", ok=False)
    assert refused.stderr.strip() == (
        'error: failed to create priorityclass: PriorityClass.scheduling.k8s.io "too-high" is invalid: '
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
    )


INVALID = [
    pytest.param(
        klass("too-high", 1_000_000_001),
        "value",
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        id="value-above-user-range",
    ),
    pytest.param(
        klass("system-custom", 2_000_000_000),
        "metadata.name",
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system "
        "use only. error: system-custom is not a known system priority class",
        id="system-prefix",
    ),
    pytest.param(
        {k: v for k, v in klass("no-value", 0).items() if k != "value"},
        "value",
        "value: Required value",
        id="value-missing",
    ),
    pytest.param(
        klass("sometimes", 10, policy="Sometimes"),
        "preemptionPolicy",
        'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
        id="preemption-policy",
    ),
    pytest.param(
        klass("Not_A_Name", 10),
        "metadata.name",
        'metadata.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain',
        id="name",
    ),
]


@pytest.mark.parametrize(("body", "field", "message"), INVALID)
def test_an_invalid_class_is_refused_naming_the_field(
    kubectl: Kubectl, fleet_api: FleetApiThread, body: Any, field: str, message: str
) -> None:
    name = body["metadata"]["name"]
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(body), ok=False)
    assert done.returncode == 1
    assert done.stderr.startswith(f'The PriorityClass "{name}" is invalid: {message}')
    code, status = call(fleet_api, "POST", CLASSES, body)
    assert (code, status["kind"], status["reason"]) == (422, "Status", "Invalid")
    assert causes(status) == [field]
    assert Objects(fleet_api.client).list(PRIORITY_CLASS)[0] == []


def test_the_system_classes_may_be_created_only_as_kubernetes_defines_them(kubectl: Kubectl) -> None:
    wrong = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("system-node-critical", 5)), ok=False)
    assert "error: value of system-node-critical PriorityClass must be 2000001000" in wrong.stderr
    right = klass("system-node-critical", 2_000_001_000)
    assert kubectl("apply", "-f", "-", stdin=yaml.safe_dump(right)).returncode == 0


def test_only_one_class_may_be_the_global_default(
    kubectl: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("normal", 10, default=True)))
    message = "PriorityClass normal is already marked as default. Only one default can exist"
    second = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("other", 20, default=True)), ok=False)
    assert second.returncode == 1
    assert f'priorityclasses.scheduling.k8s.io "other" is forbidden: {message}' in second.stderr
    code, status = call(fleet_api, "POST", CLASSES, klass("other", 20, default=True))
    assert (code, status["reason"], status["message"]) == (
        403,
        "Forbidden",
        f'priorityclasses.scheduling.k8s.io "other" is forbidden: {message}',
    )
    assert causes(status) == ["globalDefault"]
    # nor may another class become the default by an update
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("other", 20)))
    marked = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("other", 20, default=True)), ok=False)
    assert message in marked.stderr
    # the default itself may be applied again, and stop being the default
    assert (
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("normal", 10, default=True))).returncode == 0
    )
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("normal", 10)))
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(klass("other", 20, default=True)))
    defaults = {
        row[0]: row[2] for row in table(kubectl("get", "priorityclass").stdout)[1:] if row[2] == "true"
    }
    assert defaults == {"other": "true"}


def test_value_and_preemption_policy_cannot_change(kubectl: Kubectl, fleet_api: FleetApiThread) -> None:
    kubectl("apply", "-f", "-", stdin=MINDCLUSTER)
    changed = MINDCLUSTER.replace("value: 100\n", "value: 5000\n")
    done = kubectl("apply", "-f", "-", stdin=changed, ok=False)
    assert done.returncode == 1
    assert (
        'The PriorityClass "training-low" is invalid: value: Forbidden: may not be changed in an update.'
        in (done.stderr)
    )
    policy = MINDCLUSTER.replace("preemptionPolicy: Never", "preemptionPolicy: PreemptLowerPriority")
    done = kubectl("apply", "-f", "-", stdin=policy, ok=False)
    assert (
        'The PriorityClass "training-low" is invalid: preemptionPolicy: Invalid value: '
        '"PreemptLowerPriority": field is immutable'
    ) in done.stderr
    current = call(fleet_api, "GET", f"{CLASSES}/training-low")[1]
    body = copy.deepcopy(current)
    body["value"] = 7
    code, status = call(fleet_api, "PUT", f"{CLASSES}/training-low", body)
    assert (code, status["reason"], causes(status)) == (422, "Invalid", ["value"])
    # leaving the policy out of an update keeps its default rather than changing it
    body = copy.deepcopy(call(fleet_api, "GET", f"{CLASSES}/inference-high")[1])
    del body["preemptionPolicy"]
    body["description"] = "changed"
    code, updated = call(fleet_api, "PUT", f"{CLASSES}/inference-high", body)
    assert (code, updated["preemptionPolicy"], updated["description"]) == (
        200,
        "PreemptLowerPriority",
        "changed",
    )
    assert kubectl("get", "pc", "training-low", "-o", "jsonpath={.value}").stdout == "100"


# --- jobs that name a class ------------------------------------------------------------------------


def test_a_job_naming_a_class_is_queued_with_its_value(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    with_tree("apply", "-f", "-", stdin=MINDCLUSTER)
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("infer", priority_class="inference-high")))
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("train", priority_class="training-low")))
    assert queued(fleet_redis, "infer") == 1000
    assert queued(fleet_redis, "train") == 100
    assert priority_status(fleet_redis, "train") == {
        "priority": 100,
        "priorityClassName": "training-low",
        "preemptionPolicy": "Never",
    }
    wide = table(with_tree("get", "acjob", "-o", "wide").stdout)
    assert wide[0] == ["NAME", "STATE", "CLUSTER", "QUEUE", "AGE", "PRIORITY"]
    assert {row[0]: row[-1] for row in wide[1:]} == {"infer": "1000", "train": "100"}


def test_a_job_naming_an_unknown_class_is_refused_and_nothing_is_stored(
    with_tree: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    body = job(priority_class="gold")
    done = with_tree("create", "-f", "-", stdin=yaml.safe_dump(body), ok=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": ascendjobs.mindxdl.gitee.com '
        f'"{JOB_NAME}" is forbidden: {FIELD}: no PriorityClass with name gold was found'
    )
    dry = with_tree("create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(body), ok=False)
    assert "no PriorityClass with name gold was found" in dry.stderr
    code, status = call(fleet_api, "POST", f"{JOBS}/namespaces/default/ascendjobs", body)
    assert (code, status["kind"], status["reason"], status["code"]) == (403, "Status", "Forbidden", 403)
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueNotFound",
            "message": "no PriorityClass with name gold was found",
            "field": FIELD,
        }
    ]
    assert Objects(fleet_redis).list(FLEET_ASCENDJOB)[0] == []
    assert Objects(fleet_redis).list(FLEET_EVENT)[0] == []
    assert Ledger(fleet_redis).pending.records() == {}
    # once the class exists, the same job is accepted
    with_tree("apply", "-f", "-", stdin=yaml.safe_dump(klass("gold", 500)))
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(body))
    assert queued(fleet_redis, JOB_NAME) == 500


def test_the_global_default_then_the_annotation_then_zero(
    with_tree: Kubectl, fleet_redis: redis.Redis
) -> None:
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("annotated", annotation="7")))
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("bare")))
    assert (queued(fleet_redis, "annotated"), queued(fleet_redis, "bare")) == (7, 0)
    with_tree("apply", "-f", "-", stdin=yaml.safe_dump(klass("normal", 50, default=True)))
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("defaulted")))
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("annotated-too", annotation="7")))
    assert queued(fleet_redis, "defaulted") == 50
    assert queued(fleet_redis, "annotated-too") == 50  # the annotation is only the fallback
    assert priority_status(fleet_redis, "defaulted")["priorityClassName"] == "normal"
    with_tree("apply", "-f", "-", stdin=MINDCLUSTER)
    with_tree(
        "create", "-f", "-", stdin=yaml.safe_dump(job("named", priority_class="training-low", annotation="7"))
    )
    assert queued(fleet_redis, "named") == 100  # the class wins over both


def test_priority_is_kept_after_the_class_is_deleted(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    with_tree("apply", "-f", "-", stdin=MINDCLUSTER)
    with_tree("create", "-f", "-", stdin=yaml.safe_dump(job("train", priority_class="training-low")))
    with_tree("delete", "priorityclass", "training-low")
    with_tree("apply", "-f", "-", stdin=yaml.safe_dump(klass("training-low", 1, default=True)))
    # the reconcile path: the ledger lost the job; the dispatcher queues the stored object again
    ledger = Ledger(fleet_redis)
    ledger.release("default/train")
    assert ledger.pending.record("default/train") is None
    enqueue(ledger, Objects(fleet_redis).get(FLEET_ASCENDJOB, "default", "train"))
    assert queued(fleet_redis, "train") == 100
    assert with_tree("get", "acjob", "train", "-o", "jsonpath={.status.priority}").stdout == "100"
