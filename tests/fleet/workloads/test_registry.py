"""The kind registry: one adapter per kind, and job keys that carry the kind."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleet.workloads import (
    KINDS,
    Dependent,
    Pausable,
    PodEvidence,
    QueueNaming,
    UnknownKind,
    adapter_for,
    is_dependent,
    is_pausable,
    is_pod_evidence,
    is_queue_naming,
    job_key,
    job_ref,
    ref_for,
)
from fleet.workloads.kubeflow_jobs import pytorchjob


def _job(api_version: str, kind: str, name: str = "train", namespace: str = "team-a") -> dict[str, object]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}


def test_an_ascendjob_and_a_pytorchjob_of_one_name_have_different_keys() -> None:
    ascend = job_key(_job("mindxdl.gitee.com/v1", "AscendJob"))
    torch = job_key(_job("kubeflow.org/v1", "PyTorchJob"))
    assert ascend != torch
    assert torch == "pytorchjobs.kubeflow.org:team-a/train"
    assert job_ref(torch).adapter is pytorchjob and job_ref(torch).names == ("team-a", "train")


def test_keys_written_before_other_kinds_still_name_their_ascendjob() -> None:
    """The ledger, RQ payloads and reservations of an older Fleet hold ``namespace/name``."""
    assert job_key(_job("mindxdl.gitee.com/v1", "AscendJob")) == "team-a/train"
    ref = job_ref("team-a/train")
    assert ref.adapter.kind == "AscendJob" and ref.names == ("team-a", "train") and ref.tag == ""


def test_every_kind_round_trips_through_its_key() -> None:
    for adapter in KINDS:
        obj = _job(adapter.api_version, adapter.kind)
        ref = job_ref(job_key(obj))
        assert ref.adapter is adapter_for(obj) is adapter
        assert ref_for(ref.tag, ref.namespace, ref.name).key == job_key(obj)


def test_kinds_are_unique_and_a_key_of_an_unknown_kind_is_refused() -> None:
    assert len({(a.api_version, a.kind) for a in KINDS}) == len(KINDS)
    assert len({(a.resource.group, a.resource.plural) for a in KINDS}) == len(KINDS)
    with pytest.raises(UnknownKind, match="xgboostjobs"):
        job_ref("xgboostjobs.kubeflow.org:team-a/train")


def test_what_each_kind_can_do_is_answered_as_isinstance_answers_it() -> None:
    """The capability checks are cached per adapter class (a protocol check walks its members
    each time on Python 3.11): every served kind gets the answer ``isinstance`` gives, asked
    twice, and the kinds that hold a switch, name a queue or need a runtime are recognised."""
    checks: dict[object, Callable[[object], bool]] = {
        Pausable: is_pausable,
        Dependent: is_dependent,
        PodEvidence: is_pod_evidence,
        QueueNaming: is_queue_naming,
    }
    for adapter in KINDS:
        for protocol, check in checks.items():
            expected = isinstance(adapter, protocol)  # type: ignore[arg-type]
            assert check(adapter) is expected and check(adapter) is expected, (adapter.kind, protocol)
    by_kind = {adapter.kind: adapter for adapter in KINDS}
    assert is_pausable(by_kind["PyTorchJob"]) and not is_pausable(by_kind["AscendJob"])
    assert is_dependent(by_kind["TrainJob"]) and not is_dependent(by_kind["PyTorchJob"])
    assert is_queue_naming(by_kind["AscendJob"])
    assert not is_pausable(object()) and not is_queue_naming(object())
