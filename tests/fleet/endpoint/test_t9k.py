"""T9k's kinds at the fleet API: served by their names, queued by their t9kScheduler, paused and
resumed by their one mutable field; kubectl shows them with Fleet's columns."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import redis
import yaml

from fleet.endpoint.auth import parse_token_file
from fleet.jobs.submit import job_key
from fleet.kinds import fleet_kind
from fleet.state import Objects
from fleet.workloads.t9k_jobs import t9k_tfjob
from queues import QUOTA_LABEL, JobState, Ledger
from tests.fleet.endpoint.conftest import SAMPLES, call
from tests.support.fleet_api import FleetApiThread
from tests.support.job_states import admit as admit_to
from tests.support.kubectl import Kubectl, table

T9K: Final = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default"
TREES: Final = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"
QUEUE_FIELD: Final = "spec.scheduler.t9kScheduler.queue"
FLEET_TFJOB: Final = fleet_kind(t9k_tfjob)


def admit(client: redis.Redis, key: str, name: str) -> None:
    """What the dispatcher does for a job that fits: admitted by the ledger, placed on member-1."""
    assert Ledger(client).admit_pending(key).admitted

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        return admit_to(obj, "member-1", attempt=1)

    assert Objects(client).mutate(FLEET_TFJOB, "default", name, change) is not None


def tf_job(**scheduler: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / "t9k-tensorflowtrainingjob.yaml").read_text())
    body["metadata"]["namespace"] = "default"
    if scheduler:
        body["spec"]["scheduler"] = {"t9kScheduler": scheduler}
    return body


def apply_tree(api: FleetApiThread) -> None:
    """root -> team (namespace default) and other (namespace other), cpu enough for one sample."""
    leaf = {"max": {"cpu": 2, "kube-queue/max-jobs": 10}}
    tree = {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "max": {"cpu": 100},
                "min": {"cpu": 100},
                "children": [
                    {"name": "team", "namespaces": ["default"], **leaf},
                    {"name": "other", "namespaces": ["other"], **leaf},
                ],
            }
        },
    }
    code, answer = call(api, "POST", TREES, tree)
    assert code == 201, answer


def test_the_t9k_queue_and_priority_decide_the_leaf_and_the_order(fleet_api: FleetApiThread) -> None:
    apply_tree(fleet_api)
    code, stored = call(fleet_api, "POST", f"{T9K}/tensorflowtrainingjobs", tf_job(queue="team", priority=50))
    assert code == 201, stored
    assert (stored["status"]["queue"], stored["status"]["priority"]) == ("root-team", 50)
    code, answer = call(fleet_api, "POST", f"{T9K}/mpijobs", _renamed_mpi("elsewhere", queue="other"))
    assert code == 403, answer
    (cause,) = answer["details"]["causes"]
    assert cause["field"] == QUEUE_FIELD
    assert "'other'" in cause["message"]
    code, answer = call(fleet_api, "POST", f"{T9K}/mpijobs", _renamed_mpi("nowhere", queue="nope"))
    assert code == 422, answer
    assert answer["details"]["causes"][0]["field"] == QUEUE_FIELD
    code, stored = call(fleet_api, "POST", f"{T9K}/mpijobs", _renamed_mpi("mpi", queue="default"))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-team"  # T9k's default queue: the namespace's leaf


def _renamed_mpi(name: str, **scheduler: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / "t9k-mpijob.yaml").read_text())
    body["metadata"].update(name=name, namespace="default")
    body["spec"]["scheduler"] = {"t9kScheduler": scheduler}
    return body


def test_pausing_gives_the_quota_back_and_resuming_takes_it_again(
    kubectl: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    apply_tree(fleet_api)
    code, stored = call(fleet_api, "POST", f"{T9K}/tensorflowtrainingjobs", tf_job())
    assert code == 201, stored
    key = job_key(stored)
    admit(fleet_redis, key, "tensorflow-example")
    ledger = Ledger(fleet_redis)
    assert ledger.usage("team")["cpu"] == 2000

    other = copy.deepcopy(stored)
    other["spec"]["replicaSpecs"][0]["replicas"] = 2
    code, answer = call(fleet_api, "PUT", f"{T9K}/tensorflowtrainingjobs/tensorflow-example", other)
    assert code == 422, answer
    assert answer["details"]["causes"][0]["field"] == "spec"

    job = ("tensorflowtrainingjob", "tensorflow-example")
    kubectl("patch", *job, "--type", "merge", "-p", '{"spec":{"runMode":{"pause":{"enabled":true}}}}')
    rows = table(kubectl("get", *job).stdout)
    assert rows[0][:3] == ["NAME", "STATE", "CLUSTER"]
    assert rows[1][:3] == ["tensorflow-example", "Paused", "<none>"]
    assert ledger.state(key) is JobState.ABSENT
    assert ledger.usage("team").get("cpu", 0) == 0

    kubectl("patch", *job, "--type", "merge", "-p", '{"spec":{"runMode":{"pause":{"enabled":false}}}}')
    assert table(kubectl("get", *job).stdout)[1][:2] == ["tensorflow-example", "Queued"]
    assert ledger.state(key) is JobState.PENDING
    admit(fleet_redis, key, "tensorflow-example")
    assert ledger.usage("team")["cpu"] == 2000
    events = kubectl("describe", *job).stdout
    assert "Paused" in events and "Resumed" in events


def test_a_job_submitted_paused_is_stored_paused_and_not_queued(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    body = tf_job()
    body["spec"]["runMode"] = {"pause": {"enabled": True}}
    code, stored = call(fleet_api, "POST", f"{T9K}/tensorflowtrainingjobs", body)
    assert code == 201, stored
    assert stored["status"]["conditions"][-1]["type"] == "Paused"
    assert Ledger(fleet_redis).state(job_key(stored)) is JobState.ABSENT


def test_kubectl_gets_t9k_jobs_by_their_names_and_the_mpijob_by_its_group(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(SAMPLES / "t9k-tensorflowtrainingjob.yaml"))
    kubectl("apply", "-f", str(SAMPLES / "t9k-mpijob.yaml"))
    rows = table(kubectl("get", "tensorflowtrainingjobs").stdout)
    assert rows[0] == ["NAME", "STATE", "CLUSTER", "QUEUE", "AGE"]
    assert rows[1][:2] == ["tensorflow-example", "Queued"]
    rows = table(kubectl("get", "mpijobs.batch.tensorstack.dev").stdout)
    assert [r[0] for r in rows[1:]] == ["mpi-example"]


def test_an_owner_may_flip_the_pause_switch_and_nothing_else(fleet_redis: redis.Redis) -> None:
    tokens = parse_token_file('alice-token-t1,alice,u-1,"namespace:default"\n')
    patch = {"spec": {"runMode": {"pause": {"enabled": True}}}}
    with FleetApiThread(fleet_redis, tokens=tokens, members=lambda: ["member-1"]) as api:
        code, stored = call(api, "POST", f"{T9K}/tensorflowtrainingjobs", tf_job(), token="alice-token-t1")
        assert code == 201, stored
        path = f"{T9K}/tensorflowtrainingjobs/tensorflow-example"
        code, paused = call(api, "PATCH", path, patch, token="alice-token-t1", merge=True)
        assert code == 200, paused
        assert paused["status"]["conditions"][-1]["type"] == "Paused"
        labelled = {"metadata": {"labels": {QUOTA_LABEL: "elsewhere"}}}
        code, answer = call(api, "PATCH", path, labelled, token="alice-token-t1", merge=True)
        assert code == 422, answer
        assert answer["details"]["causes"][0]["field"] == f"metadata.labels[{QUOTA_LABEL}]"
        code, answer = call(
            api,
            "PATCH",
            f"{T9K}/tensorflowtrainingjobs/tensorflow-example/status",
            {},
            token="alice-token-t1",
            merge=True,
        )
        assert code == 403, answer


def test_an_mpijob_in_t9k_s_later_shape_is_accepted_and_its_bad_values_refused(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """T9k's later documents (t9k/user-manuals, workflowtemplate.md) write the worker's processes
    as ``processesPerWorker`` and in-place restarts as ``processRecovery: {enable, limit}``."""
    sample = SAMPLES / "t9k-mpijob-processes.yaml"
    assert "created" in kubectl("apply", "-f", str(sample)).stdout
    rows = table(kubectl("get", "mpijobs.batch.tensorstack.dev").stdout)
    assert rows[1][:2] == ["mpi-processes", "Queued"]
    bad = yaml.safe_load(sample.read_text())
    bad["metadata"]["name"] = "mpi-bad"
    bad["spec"]["worker"]["processesPerWorker"] = 0
    bad["spec"]["worker"]["processRecovery"]["limit"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    refused = kubectl("apply", "-f", str(path), ok=False)
    assert refused.returncode != 0
    assert "spec.worker.processesPerWorker" in refused.stderr
    assert "spec.worker.processRecovery.limit" in refused.stderr


def test_an_mpijob_in_t9k_s_current_shape_is_accepted_as_its_tutorials_write_it(
    kubectl: Kubectl, fleet_api: FleetApiThread
) -> None:
    """spec.mpiConfig and a spec.replicaSpecs list of a worker and a launcher (``template: {}``),
    as t9k/tutorial-examples writes every MPIJob (job/mpijob/horovod-torch/job_gpu.yaml, ...)."""
    sample = SAMPLES / "t9k-mpijob-replicaspecs.yaml"
    assert "mpijob.batch.tensorstack.dev/horovod-npu created" in kubectl("apply", "-f", str(sample)).stdout
    rows = table(kubectl("get", "mpijobs.batch.tensorstack.dev").stdout)
    assert rows[1][:2] == ["horovod-npu", "Queued"]
    code, stored = call(fleet_api, "GET", f"{T9K}/mpijobs/horovod-npu")
    assert code == 200, stored
    assert stored["spec"]["replicaSpecs"][1] == {"type": "launcher", "replicas": 1, "template": {}}
    assert stored["spec"]["mpiConfig"]["script"][0] == "python3"
    assert stored["status"]["priority"] == 60


def _current_shape(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / "t9k-mpijob-replicaspecs.yaml").read_text())
    body["metadata"].update(name=name, namespace="default")
    return body


def _causes(fleet_api: FleetApiThread, body: dict[str, Any]) -> dict[str, str]:
    code, answer = call(fleet_api, "POST", f"{T9K}/mpijobs", body)
    assert code == 422, answer
    return {c["field"]: c["message"] for c in answer["details"]["causes"]}


def test_an_mpijob_mixing_both_shapes_or_breaking_the_current_one_is_refused_by_field(
    fleet_api: FleetApiThread,
) -> None:
    mixed = _current_shape("mixed")
    mixed["spec"]["worker"] = _renamed_mpi("x")["spec"]["worker"]
    causes = _causes(fleet_api, mixed)
    assert set(causes) == {"spec.replicaSpecs", "spec.mpiConfig"}
    assert "may not be set with spec.worker" in causes["spec.replicaSpecs"]
    assert "not both" in causes["spec.mpiConfig"]

    mca = _current_shape("mca")
    mca["spec"]["mca"] = {"btl": "^openib"}  # the older shape's place for it
    assert "may not be set with spec.mca" in _causes(fleet_api, mca)["spec.mpiConfig"]

    bad = _current_shape("bad")
    bad["spec"]["replicaSpecs"][0]["type"] = "master"
    bad["spec"]["replicaSpecs"][1]["replicas"] = 2
    causes = _causes(fleet_api, bad)
    assert "(worker, launcher)" in causes["spec.replicaSpecs[0].type"]
    assert "one launcher" in causes["spec.replicaSpecs[1].replicas"]
    assert "type: worker" in causes["spec.replicaSpecs"]

    renamed = _current_shape("renamed")
    renamed["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["name"] = "mpi-worker"
    renamed["spec"]["mpiConfig"]["home"] = "usr/local"
    causes = _causes(fleet_api, renamed)
    assert "named worker" in causes["spec.replicaSpecs[0].template.spec.containers"]
    assert "absolute" in causes["spec.mpiConfig.home"]

    no_script = _current_shape("no-script")
    del no_script["spec"]["mpiConfig"]["script"]
    assert _causes(fleet_api, no_script) == {"spec.mpiConfig.script": "is required"}

    code, answer = call(fleet_api, "GET", f"{T9K}/mpijobs")
    assert code == 200 and answer["items"] == [], answer  # nothing refused was stored


def test_an_unknown_field_of_the_current_shape_is_refused(kubectl: Kubectl, tmp_path: Path) -> None:
    body = _current_shape("typo")
    body["spec"]["mpiConfig"]["scripts"] = body["spec"]["mpiConfig"].pop("script")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(body))
    refused = kubectl("apply", "-f", str(path), ok=False)
    assert refused.returncode != 0
    assert 'unknown field "spec.mpiConfig.scripts"' in refused.stderr
