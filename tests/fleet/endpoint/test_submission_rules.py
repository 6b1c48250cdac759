"""What a member would refuse is refused at submission (issue 17, requirement 2).

Each manifest is written the way a user writes one (YAML, as the MindCluster docs lay it out)
and submitted with the real kubectl and as plain HTTP: a refused one gets a 422 ``Invalid``
Status whose ``details.causes[]`` name the field, the message names the rule, and Redis (the
jobs, the queues, the quota ledger, the events) is byte for byte what it was. The edge cases a
member accepts are accepted, and the copy Fleet would create of them carries valid labels.
"""

from __future__ import annotations

import json
from string import Template
from typing import Any

import pytest
import redis
import yaml

from fleet.apiserver.validation import TOTAL_ANNOTATION_SIZE_LIMIT, validate_labels
from fleet.state import Objects
from fleet.workloads import ascendjob
from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, JOBS, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

MANIFEST = Template(
    """\
apiVersion: mindxdl.gitee.com/v1
kind: AscendJob
metadata:
  name: $name
  labels:
    framework: $framework
$annotations
spec:
  schedulerName: volcano
  runPolicy:
    schedulingPolicy:
      minAvailable: 2
      queue: default
  replicaSpecs:
    $leader:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: ascend # do not modify
            image: pytorch-test:latest
            ports:
            - containerPort: $port
              name: ascendjob-port # do not modify
            resources:
              limits:
                huawei.com/Ascend910: $npus
              requests:
                huawei.com/Ascend910: $npus
    Worker:
      replicas: $replicas
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: ascend # do not modify
            image: pytorch-test:latest
            resources:
              limits:
                huawei.com/Ascend910: $npus
              requests:
                huawei.com/Ascend910: $worker_npus
"""
)
DEFAULTS = {
    "name": "train",
    "framework": "pytorch",
    "annotations": "",
    "leader": "Master",
    "port": "2222",
    "npus": "2",
    "worker_npus": "2",
    "replicas": "1",
}


def manifest(**changes: str) -> str:
    return MANIFEST.substitute({**DEFAULTS, **changes})


def annotated(total: int, key: str = "example.com/notes") -> str:
    """An annotation block whose key and value take ``total`` bytes together."""
    return f"  annotations:\n    {key}: {'n' * (total - len(key))}"


def keyspace(client: redis.Redis) -> dict[Any, Any]:
    return {key: client.dump(key) for key in sorted(client.keys("*"))}


@pytest.fixture
def with_tree(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-f", str(TREE))
    return kubectl


REFUSED = [
    pytest.param(
        (
            {"name": "a" * 64},
            "metadata.name",
            "must be no more than 63 bytes",
        ),
        id="name-of-64-characters",
    ),
    pytest.param(
        (
            {"name": "a" * 200},
            "metadata.name",
            "must be no more than 63 bytes",
        ),
        id="name-of-200-characters",
    ),
    pytest.param(
        (
            {"name": "a" * 55},
            "metadata.name",
            "must be no more than 54 characters for a pytorch job: the ascend-operator names the Master's "
            f"Service '{'a' * 55}-master-0'",
        ),
        id="name-too-long-for-the-master-service",
    ),
    pytest.param(
        (
            {"name": "train.v2"},
            "metadata.name",
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-'",
        ),
        id="name-not-a-dns-1035-label",
    ),
    pytest.param(
        (
            {"replicas": '"2"'},
            "spec.replicaSpecs.Worker.replicas",
            'spec.replicaSpecs.Worker.replicas in body must be of type integer: "2"',
        ),
        id="replicas-as-a-string",
    ),
    pytest.param(
        (
            {"replicas": "true"},
            "spec.replicaSpecs.Worker.replicas",
            "spec.replicaSpecs.Worker.replicas in body must be of type integer: true",
        ),
        id="replicas-as-a-boolean",
    ),
    pytest.param(
        (
            {"npus": "1500m", "worker_npus": "1500m"},
            "spec.replicaSpecs.Master.template.spec.containers[0].resources.limits[huawei.com/Ascend910]",
            'Invalid value: "1500m": must be an integer',
        ),
        id="fractional-npus",
    ),
    pytest.param(
        (
            {"worker_npus": "1"},
            "spec.replicaSpecs.Worker.template.spec.containers[0].resources.requests[huawei.com/Ascend910]",
            "must be equal to huawei.com/Ascend910 limit of 2",
        ),
        id="npu-request-below-its-limit",
    ),
    pytest.param(
        (
            {"annotations": annotated(TOTAL_ANNOTATION_SIZE_LIMIT + 1)},
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        ),
        id="annotations-over-256-kib",
    ),
    pytest.param(
        (
            # The pod template is typed in the schema, as in the CRD: a schema error, worded so.
            {"port": '"2222"'},
            "spec.replicaSpecs.Master.template.spec.containers[0].ports[0].containerPort",
            'Invalid value: "string": spec.replicaSpecs.Master.template.spec.containers[0].ports[0]'
            '.containerPort in body must be of type integer: "2222"',
        ),
        id="container-port-as-a-string",
    ),
    pytest.param(
        (
            {"leader": "Scheduler"},
            "spec.replicaSpecs.Scheduler",
            "is not a replica type of a pytorch job (allowed: Master, Worker)",
        ),
        id="replica-type-of-another-framework",
    ),
    pytest.param(
        (
            {"framework": "tensorflow"},
            "spec.replicaSpecs.Chief",
            "is required for a tensorflow job",
        ),
        id="tensorflow-without-its-chief",
    ),
]


@pytest.mark.parametrize("case", REFUSED)
def test_what_a_member_would_refuse_is_refused_at_submission(
    with_tree: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis, case: tuple[Any, ...]
) -> None:
    changes, field, rule = case
    before = keyspace(fleet_redis)
    text = manifest(**changes)
    done = with_tree("create", "-f", "-", stdin=text, ok=False)
    assert done.returncode == 1
    assert "is invalid: " in done.stderr and f"{field}: " in done.stderr and rule in done.stderr
    assert keyspace(fleet_redis) == before

    code, status = call(fleet_api, "POST", f"{JOBS}/namespaces/default/ascendjobs", yaml.safe_load(text))
    assert (code, status["kind"], status["reason"]) == (422, "Status", "Invalid")
    causes = {cause["field"]: cause["message"] for cause in status["details"]["causes"]}
    assert field in causes and rule in causes[field], causes
    assert keyspace(fleet_redis) == before


def test_a_server_dry_run_refuses_the_same(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    before = keyspace(fleet_redis)
    done = with_tree("create", "--dry-run=server", "-f", "-", stdin=manifest(replicas='"2"'), ok=False)
    assert "spec.replicaSpecs.Worker.replicas in body must be of type integer" in done.stderr
    assert keyspace(fleet_redis) == before


ACCEPTED = [
    pytest.param({"name": "p" * 54}, id="pytorch-name-of-54-characters"),
    pytest.param(
        {"annotations": annotated(TOTAL_ANNOTATION_SIZE_LIMIT)}, id="annotations-of-exactly-256-kib"
    ),
    pytest.param({"npus": '"8"', "worker_npus": "8"}, id="whole-npus-as-string-or-number"),
]


@pytest.mark.parametrize("changes", ACCEPTED)
def test_edge_cases_a_member_accepts_are_accepted(
    with_tree: Kubectl, fleet_redis: redis.Redis, changes: dict[str, str]
) -> None:
    text = manifest(**changes)
    name = yaml.safe_load(text)["metadata"]["name"]
    done = with_tree("create", "-f", "-", stdin=text)
    assert done.stdout.strip() == f"ascendjob.mindxdl.gitee.com/{name} created"
    assert list(Ledger(fleet_redis).pending.records()) == [f"default/{name}"]
    stored = Objects(fleet_redis).get(FLEET_ASCENDJOB, "default", name)
    copy = ascendjob.member_copy(stored, stored["metadata"]["uid"], 1)
    assert validate_labels(copy["metadata"]["labels"], "metadata.labels") == []
    for spec in copy["spec"]["replicaSpecs"].values():
        assert validate_labels(spec["template"]["metadata"]["labels"], "labels") == []


def test_a_63_character_name_is_accepted_where_the_operator_makes_no_service(
    with_tree: Kubectl, fleet_redis: redis.Redis
) -> None:
    """A mindspore job of one 1-NPU worker has no Scheduler and so no Service: its name may take
    all 63 characters a label value has, and Fleet's own ``fleet.io/job-name`` label holds it."""
    job: dict[str, Any] = yaml.safe_load(
        manifest(name="m" * 63, framework="mindspore", npus="1", worker_npus="1")
    )
    del job["spec"]["replicaSpecs"]["Master"]
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    with_tree("create", "-f", "-", stdin=json.dumps(job))
    stored = Objects(fleet_redis).get(FLEET_ASCENDJOB, "default", "m" * 63)
    copy = ascendjob.member_copy(stored, stored["metadata"]["uid"], 1)
    assert copy["metadata"]["labels"]["fleet.io/job-name"] == "m" * 63
    assert validate_labels(copy["metadata"]["labels"], "metadata.labels") == []


def test_the_sample_is_still_accepted_as_written(with_tree: Kubectl) -> None:
    assert with_tree("create", "-f", str(JOB)).returncode == 0


def test_an_annotation_that_grows_the_job_past_256_kib_is_refused(
    with_tree: Kubectl, fleet_redis: redis.Redis
) -> None:
    """The limit holds for updates as well: ``kubectl annotate`` cannot push a job past it."""
    with_tree("create", "-f", "-", stdin=manifest(annotations=annotated(TOTAL_ANNOTATION_SIZE_LIMIT - 10)))
    before = keyspace(fleet_redis)
    done = with_tree("annotate", "acjob", "train", "example.com/more=0123456789", ok=False)
    assert "metadata.annotations: Too long: may not be more than 262144 bytes" in done.stderr
    assert keyspace(fleet_redis) == before
