"""The kind registry: one adapter per kind, and job keys that carry the kind."""

from __future__ import annotations

import pytest

from fleet.workloads import KINDS, UnknownKind, adapter_for, job_key, job_ref, ref_for
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
