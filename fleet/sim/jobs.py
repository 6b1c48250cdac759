"""Job logic over plain kube JSON dicts (AscendJob and the Kubeflow kinds, :mod:`fleet.sim.kinds`):
validation, the pods a job owns, conditions, replica status, and the Kubeflow controllers' rules
(restart policies and exit codes, backoff limits, TFJob's success rule, clean-up).

Everything here is pure (no store, no clock unless given one), so the operator in
:mod:`fleet.sim.operator` stays a thin loop and each rule is unit-tested on its own.

Conditions follow the kubeflow job controller the ascend-operator is built on: setting a
condition removes an older one of the same type and appends the new one, so the LAST entry is
the job's state (what ``kubectl get acjob`` shows as STATE); ``Running`` and ``Restarting``
replace each other, and a finished job's ``Running`` condition turns ``status: "False"``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet import kubeflow
from fleet.apiserver import Obj
from fleet.ascend import (
    SCHEDULE_POLICY_ANNOTATION,
    Condition,
)
from fleet.sim.kinds import Rules, sim_kind
from fleet.sim.predicates import PodSpecError, pod_requests
from fleet.timestamps import now_rfc3339

__all__ = [
    "BATCH_BACKOFF_LIMIT",
    "DURATION_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "TERMINAL_STATES",
    "backoff_limit",
    "build_pods",
    "clean_pod_policy",
    "duration_seconds",
    "exit_code",
    "job_event",
    "job_key",
    "launcher_pod_name",
    "min_available",
    "past_backoff_limit",
    "replica_statuses",
    "restart_policy",
    "restarts",
    "restarts_on_failure",
    "retryable_exit",
    "set_condition",
    "state",
    "tf_deciding_types",
    "tf_succeeded",
    "validate_job",
]

#: Per-job override of how long the job runs before it succeeds (seconds, a number).
DURATION_ANNOTATION: Final = "sim.fleet.io/duration-seconds"
#: Per-job exit code of its first pod when its duration is up (an integer; 0, the default: it
#: succeeds). Non-zero: the job fails by its own code on every run, on every member, as a job
#: with a bug does (``fail-job`` injects a failure into one member's copy instead).
EXIT_CODE_ANNOTATION: Final = "sim.fleet.io/exit-code"
TERMINAL_STATES: Final = frozenset({Condition.SUCCEEDED, Condition.FAILED})
_NAME_LIMIT: Final = 63
_LAUNCHER: Final = "Launcher"
#: The letters Kubernetes draws generated name suffixes from (``utilrand.String``).
_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


def job_key(job: Obj) -> tuple[str, str]:
    meta = job.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def state(job: Obj) -> str | None:
    """The job's state: the type of its last condition (``None`` before the operator saw it)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    return str(conditions[-1].get("type")) if conditions else None


def _replica_specs(job: Obj) -> list[tuple[str, Mapping[str, Any]]]:
    sim = sim_kind(job)
    specs = sim.specs(job)
    ordered = sorted(specs.items(), key=lambda item: (item[0] not in sim.leaders, list(specs).index(item[0])))
    return [(str(kind), spec) for kind, spec in ordered]


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas", 1)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else -1


def validate_job(job: Obj) -> str | None:
    """The first reason the operator cannot run this job (naming the field), or ``None``."""
    name = job_key(job)[1]
    if not name:
        return "metadata.name: is required"
    spec = job.get("spec")
    if not isinstance(spec, Mapping):
        return "spec: is required"
    field = sim_kind(job).specs_field
    specs = sim_kind(job).specs(job)
    if not specs:
        return f"spec.{field}: at least one replica type is required"
    total = 0
    for kind, replica in specs.items():
        where = f"spec.{field}.{kind}"
        if not isinstance(replica, Mapping):
            return f"{where}: must be an object"
        count = _replicas(replica)
        if count < 0:
            return f"{where}.replicas: must be a non-negative integer"
        total += count
        pod_name = f"{name}-{str(kind).lower()}-{max(count - 1, 0)}"
        if len(pod_name) > _NAME_LIMIT:
            return f"{where}: pod name {pod_name!r} is longer than {_NAME_LIMIT} characters"
        template = replica.get("template")
        pod_spec = template.get("spec") if isinstance(template, Mapping) else None
        if not isinstance(pod_spec, Mapping):
            return f"{where}.template.spec: is required"
        containers = pod_spec.get("containers")
        if not isinstance(containers, list) or not containers:
            return f"{where}.template.spec.containers: at least one container is required"
        try:
            pod_requests(pod_spec, f"{where}.template.spec")
        except PodSpecError as exc:
            return str(exc)
    if total == 0:
        return f"spec.{field}: the job has no pods (every replicas is 0)"
    wanted = min_available(job)
    if wanted is not None and not 0 < wanted <= total:
        field = "spec.runPolicy.schedulingPolicy.minAvailable"
        return f"{field}: {wanted} must be between 1 and the job's {total} pods"
    limit = backoff_limit(job)
    if limit is not None and limit < 0:
        return f"spec.runPolicy.backoffLimit: {limit} must not be negative"
    if duration_seconds(job, 0.0) < 0:
        return f"metadata.annotations.{DURATION_ANNOTATION}: must be a non-negative number of seconds"
    if exit_code(job) is None:
        return f"metadata.annotations.{EXIT_CODE_ANNOTATION}: must be an integer from 0 to 255"
    return None


def _run_policy(job: Obj) -> Mapping[str, Any]:
    policy = (job.get("spec") or {}).get("runPolicy") or {}
    return policy if isinstance(policy, Mapping) else {}


def min_available(job: Obj) -> int | None:
    value = (_run_policy(job).get("schedulingPolicy") or {}).get("minAvailable")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def backoff_limit(job: Obj) -> int | None:
    value = _run_policy(job).get("backoffLimit")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def duration_seconds(job: Obj, default: float) -> float:
    """How long the job runs: its annotation, else ``default``; -1 when the annotation is not a number."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(DURATION_ANNOTATION)
    if raw is None:
        return default
    try:
        return float(raw)
    except (TypeError, ValueError):
        return -1.0


def exit_code(job: Obj) -> int | None:
    """The exit code the job's annotation gives its first pod (0 without one); ``None`` when the
    annotation is not an integer from 0 to 255."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(EXIT_CODE_ANNOTATION)
    if raw is None:
        return 0
    try:
        code = int(str(raw))
    except ValueError:
        return None
    return code if 0 <= code <= 255 else None


def restarts_on_failure(job: Obj) -> bool:
    """Without a backoff limit, whether a failed pod restarts the job (its restartPolicy is not Never)."""
    return any(str(spec.get("restartPolicy", "Never")) != "Never" for _, spec in _replica_specs(job))


def launcher_pod_name(name: str, uid: str, attempt: int = 0) -> str:
    """The MPI launcher's pod: the batch Job ``<job>-launcher`` names its pods with a random
    five-character suffix (``names.SimpleNameGenerator``); here one drawn from the job's uid and
    the launcher's attempt, so the operator can name the pod again without listing."""
    digest = hashlib.sha256(f"{uid}/{attempt}".encode()).digest()
    return f"{name}-launcher-" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])


def _pod_name(job: Obj, kind: str, index: int) -> str:
    name = job_key(job)[1]
    if sim_kind(job).rules is Rules.MPI and kind == _LAUNCHER:
        return launcher_pod_name(name, str((job.get("metadata") or {}).get("uid") or ""))
    return f"{name}-{kind.lower()}-{index}"


def _kind_labels(job: Obj, kind: str, index: int) -> dict[str, str]:
    """The labels the kind's operator adds besides the job name and type (or role).

    The MPI operator: its name on every pod, a worker's index (shifted by one when the launcher
    runs as a worker, which takes index 0: ``workerReplicaIndexLabel``), no index on the launcher
    otherwise. The TFJob controller: ``job-role: master`` on the pod that decides the job (the
    chief or master, else worker 0: ``IsMasterRole``)."""
    sim = sim_kind(job)
    index_label = sim.labels[2]
    if sim.rules is Rules.MPI:
        labels = {kubeflow.OPERATOR_NAME_LABEL: sim.component}
        as_worker = (job.get("spec") or {}).get("runLauncherAsWorker") is True
        if kind == _LAUNCHER:
            if as_worker:
                labels[index_label] = "0"
        else:
            labels[index_label] = str(index + 1 if as_worker else index)
        return labels
    labels = {index_label: str(index)}
    if sim.rules is Rules.TENSORFLOW and (kind, index) in {(t, 0) for t in tf_deciding_types(job)}:
        labels[kubeflow.JOB_ROLE_LABEL] = "master"
    return labels


def build_pods(job: Obj) -> list[Obj]:
    """The pods the operator creates for a job, leaders first, named ``<job>-<type>-<index>``
    (an MPIJob's launcher: :func:`launcher_pod_name`)."""
    meta = job.get("metadata") or {}
    namespace, name = job_key(job)
    spec = job.get("spec") or {}
    policy = (meta.get("annotations") or {}).get(SCHEDULE_POLICY_ANNOTATION)
    sim = sim_kind(job)
    job_label, type_label, _ = sim.labels
    owner = {
        "apiVersion": sim.resource.api_version,
        "kind": sim.resource.kind,
        "name": name,
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pods: list[Obj] = []
    for kind, replica in _replica_specs(job):
        template = replica.get("template") or {}
        template_meta = template.get("metadata") or {}
        for index in range(_replicas(replica)):
            pod_spec = _with_string_quantities(template.get("spec") or {})
            pod_spec.setdefault("schedulerName", spec.get("schedulerName") or "volcano")
            pod_spec.setdefault("restartPolicy", "Never")
            annotations = dict(template_meta.get("annotations") or {})
            if policy is not None:
                annotations[SCHEDULE_POLICY_ANNOTATION] = policy
            pod_meta: dict[str, Any] = {
                "name": _pod_name(job, kind, index),
                "namespace": namespace,
                "labels": {
                    **(template_meta.get("labels") or {}),
                    job_label: name,
                    type_label: kind.lower(),
                    **_kind_labels(job, kind, index),
                },
                "ownerReferences": [owner],
            }
            if annotations:
                pod_meta["annotations"] = annotations
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec})
    return pods


def _with_string_quantities(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a pod spec whose resource quantities are strings, as the API server serialises them.

    A job written in YAML says ``huawei.com/Ascend910: 2``; a Pod from a real API server always
    carries ``"2"``, and clients (the ``kubernetes`` models) insist on it.
    """
    copied = dict(spec)
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        converted = []
        for container in containers:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping):
                as_strings = {
                    part: {k: str(v) for k, v in values.items()} if isinstance(values, Mapping) else values
                    for part, values in resources.items()
                }
                converted.append({**container, "resources": as_strings})
            else:
                converted.append(container)
        copied[key] = converted
    return copied


def set_condition(status: dict[str, Any], kind: str, reason: str, message: str, now: str) -> bool:
    """Make ``kind`` the current condition; ``False`` when it already is, with this reason and message."""
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    if conditions:
        last = conditions[-1]
        if last.get("type") == kind and last.get("reason") == reason and last.get("message") == message:
            return False
    kept = []
    for condition in conditions:
        if condition.get("type") == kind:
            continue
        if {kind, condition.get("type")} == {Condition.RUNNING, Condition.RESTARTING}:
            continue
        if kind in TERMINAL_STATES and condition.get("type") == Condition.RUNNING:
            kept.append({**condition, "status": "False", "lastUpdateTime": now})
        else:
            kept.append(condition)
    kept.append(
        {
            "type": kind,
            "status": "True",
            "lastTransitionTime": now,
            "lastUpdateTime": now,
            "message": message,
            "reason": reason,
        }
    )
    status["conditions"] = kept
    return True


def replica_statuses(job: Obj, pods: Sequence[Obj]) -> dict[str, dict[str, int]]:
    """``status.replicaStatuses``: active (running), succeeded and failed pods per replica type."""
    statuses: dict[str, dict[str, int]] = {
        kind: {"active": 0, "succeeded": 0, "failed": 0} for kind, _ in _replica_specs(job)
    }
    names = {kind.lower(): kind for kind in statuses}
    type_label = sim_kind(job).labels[1]
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        kind = names.get(str(labels.get(type_label, "")))
        if kind is None:
            continue
        counts = statuses[kind]
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            counts["active"] += 1
        elif phase == "Succeeded":
            counts["succeeded"] += 1
        elif phase == "Failed":
            counts["failed"] += 1
    return {kind: {k: v for k, v in counts.items() if v} for kind, counts in statuses.items()}


def job_event(job: Obj, kind: str, reason: str, message: str, *, source: str, member: str) -> Obj:
    """An Event about ``job`` as a member's controller writes one (``kind``: Normal or Warning),
    reported by ``source`` in ``member``: one shape for every simulated controller."""
    meta = job["metadata"]
    now = now_rfc3339()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": source},
        "reportingComponent": source,
        "reportingInstance": f"{source}-{member}",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


# --- the Kubeflow controllers' rules (TFJob, MPIJob) -------------------------------------------

#: The restart policy a replica type gets when its spec names none: the training operator's
#: per-kind defaults (``TFJobDefaultRestartPolicy`` Never, ``PyTorchJobDefaultRestartPolicy``
#: OnFailure) and the MPI operator's (``DefaultLauncherRestartPolicy`` OnFailure, workers Never).
_DEFAULT_RESTART: Final = {"TFJob": "Never", "PyTorchJob": "OnFailure"}
_MPI_DEFAULT_RESTART: Final = {_LAUNCHER: "OnFailure"}
#: A batch Job's backoff limit when its spec names none (the launcher's Job: ``BackoffLimit``
#: is passed as-is, so Kubernetes' default applies).
BATCH_BACKOFF_LIMIT: Final = 6


def restart_policy(job: Obj, rtype: str) -> str:
    """The restart policy of replica type ``rtype``, defaulted as the kind's operator does."""
    sim = sim_kind(job)
    spec = sim.specs(job).get(rtype)
    written = spec.get("restartPolicy") if isinstance(spec, Mapping) else None
    if isinstance(written, str) and written:
        return written
    if sim.rules is Rules.MPI:
        return _MPI_DEFAULT_RESTART.get(rtype, "Never")
    return _DEFAULT_RESTART.get(sim.resource.kind, "Never")


def clean_pod_policy(job: Obj) -> str:
    """``runPolicy.cleanPodPolicy``: None when unset (the v1 training operator's and the MPI
    operator's default)."""
    value = _run_policy(job).get("cleanPodPolicy")
    return value if isinstance(value, str) and value else "None"


def retryable_exit(code: int) -> bool:
    """The training operator's ``IsRetryableExitCode``: 128 and above (killed by a signal, the
    environment's doing) is worth a restart under ``ExitCode``; below is the program's own."""
    return code >= 128


def restarts(policy: str, code: int) -> bool:
    """Whether a replica whose pod exited ``code`` is restarted (``ReconcilePods``): OnFailure
    and Always, or ExitCode with a retryable code; Never never."""
    return policy in ("OnFailure", "Always") or (policy == "ExitCode" and retryable_exit(code))


def past_backoff_limit(limit: int | None, restarts_so_far: int) -> bool:
    """``PastBackoffLimit`` of the training operator: the restarts counted (this one included)
    reached ``backoffLimit`` (any restart, when it is 0); never without a limit."""
    if limit is None:
        return False
    return restarts_so_far > 0 if limit == 0 else restarts_so_far >= limit


def tf_deciding_types(job: Obj) -> tuple[str, ...]:
    """The replica types whose pods decide a TFJob: its Chief or Master when it has one
    (``ContainsChiefOrMasterSpec``), else its workers."""
    specs = sim_kind(job).specs(job)
    leader = tuple(t for t in ("Chief", "Master") if t in specs)
    return leader or ("Worker",)


def tf_succeeded(job: Obj, pods: Sequence[Obj]) -> bool:
    """The TFJob controller's success rule (``UpdateJobStatus``) over the job's pods: with a
    Chief (or Master), when every pod of it succeeded; without, when worker 0 exited 0 (the
    default ``successPolicy``) or, with ``successPolicy: AllWorkers``, when every worker
    succeeded. Parameter servers and evaluators do not count."""
    specs = sim_kind(job).specs(job)
    type_label, index_label = sim_kind(job).labels[1], sim_kind(job).labels[2]

    def label(pod: Obj, key: str) -> Any:
        return ((pod.get("metadata") or {}).get("labels") or {}).get(key)

    def of(rtype: str) -> list[Obj]:
        return [p for p in pods if label(p, type_label) == rtype.lower()]

    def succeeded(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") == "Succeeded"

    deciding = tf_deciding_types(job)
    if deciding != ("Worker",):
        rtype = deciding[0]
        wanted = _replicas(specs[rtype])
        return sum(1 for p in of(rtype) if succeeded(p)) >= wanted
    workers = of("Worker")
    if (job.get("spec") or {}).get("successPolicy") == "AllWorkers":
        return sum(1 for p in workers if succeeded(p)) >= _replicas(specs.get("Worker") or {})
    return any(succeeded(p) and label(p, index_label) == "0" for p in workers)
