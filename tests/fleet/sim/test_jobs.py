"""AscendJob rules of the simulated operator: pods, validation, conditions, replica status."""

from __future__ import annotations

from typing import Any

from fleet.sim.jobs import build_pods, exit_code, replica_statuses, set_condition, state, validate_job
from tests.fleet.sim.builders import bound, sample_job, simple_job


def test_pods_are_named_labelled_and_owned_like_the_ascend_operator_makes_them() -> None:
    job = sample_job()
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 2
    job["metadata"]["annotations"] = {"huawei.com/schedule_policy": "chip2-node2"}
    pods = build_pods(job)
    assert [p["metadata"]["name"] for p in pods] == [
        "default-test-pytorch-master-0",
        "default-test-pytorch-worker-0",
        "default-test-pytorch-worker-1",
    ]
    worker = pods[2]["metadata"]
    assert worker["labels"]["job-name"] == "default-test-pytorch"
    assert worker["labels"]["replica-type"] == "worker"
    assert worker["labels"]["replica-index"] == "1"
    assert worker["labels"]["ring-controller.atlas"] == "ascend-910b"  # from the template
    assert worker["annotations"]["huawei.com/schedule_policy"] == "chip2-node2"
    owner = worker["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "AscendJob",
        "default-test-pytorch",
        "uid-default-test-pytorch",
        True,
    )
    assert pods[0]["spec"]["nodeSelector"] == {"host-arch": "huawei-arm", "accelerator-type": "card-910b-2"}


def test_leaders_come_first_whatever_the_spec_order() -> None:
    job = simple_job("j", workers=1)
    job["spec"]["replicaSpecs"]["Master"] = job["spec"]["replicaSpecs"]["Worker"]
    assert [p["metadata"]["name"] for p in build_pods(job)] == ["j-master-0", "j-worker-0"]


def test_validation_names_the_field() -> None:
    assert validate_job(sample_job()) is None
    job = sample_job()
    job["spec"]["replicaSpecs"] = {}
    assert validate_job(job) == "spec.replicaSpecs: at least one replica type is required"
    job = sample_job()
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = "two"
    assert validate_job(job) == "spec.replicaSpecs.Worker.replicas: must be a non-negative integer"
    job = sample_job()
    job["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
        "huawei.com/Ascend910": "lots"
    }
    problem = validate_job(job)
    assert problem is not None
    assert problem.startswith(
        "spec.replicaSpecs.Master.template.spec.containers[0].resources.requests.huawei.com/Ascend910"
    )
    job = sample_job()
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 3
    assert (
        validate_job(job)
        == "spec.runPolicy.schedulingPolicy.minAvailable: 3 must be between 1 and the job's 2 pods"
    )
    job = sample_job()
    job["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "soon"}
    assert (
        validate_job(job)
        == "metadata.annotations.sim.fleet.io/duration-seconds: must be a non-negative number of seconds"
    )


def test_conditions_keep_one_per_type_and_the_last_is_the_state() -> None:
    status: dict[str, object] = {}
    assert set_condition(status, "Created", "JobCreated", "created", "t1")
    assert not set_condition(status, "Created", "JobCreated", "created", "t2")  # nothing new
    assert set_condition(status, "Created", "PodGroupPending", "waiting", "t2")
    assert set_condition(status, "Running", "JobRunning", "running", "t3")
    assert set_condition(status, "Restarting", "jobRestarting", "restarting", "t4")
    assert set_condition(status, "Running", "JobRunning", "running", "t5")
    assert set_condition(status, "Failed", "JobFailed", "failed", "t6")
    conditions = status["conditions"]
    assert isinstance(conditions, list)
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Created", "True", "PodGroupPending"),
        ("Running", "False", "JobRunning"),
        ("Failed", "True", "JobFailed"),
    ]
    assert set(conditions[-1]) == {
        "type",
        "status",
        "lastTransitionTime",
        "lastUpdateTime",
        "message",
        "reason",
    }
    assert state({"status": status}) == "Failed"


def test_replica_statuses_count_pods_by_phase_per_type() -> None:
    job = sample_job()
    master, worker = build_pods(job)
    statuses = replica_statuses(job, [bound(master, "n", "Running"), bound(worker, "n", "Failed")])
    assert statuses == {"Master": {"active": 1}, "Worker": {"failed": 1}}
    assert replica_statuses(job, []) == {"Master": {}, "Worker": {}}


def test_the_exit_code_annotation_is_an_integer_from_0_to_255() -> None:
    def annotated(value: str | None) -> dict[str, Any]:
        job = sample_job()
        if value is not None:
            job["metadata"]["annotations"] = {"sim.fleet.io/exit-code": value}
        return job

    assert [exit_code(annotated(v)) for v in (None, "0", "1", "255")] == [0, 0, 1, 255]
    for bad in ("-1", "256", "one", "1.5"):
        assert exit_code(annotated(bad)) is None
        assert "sim.fleet.io/exit-code" in (validate_job(annotated(bad)) or "")
