"""Whose fault a member's refusal is: the job's, which every member would repeat, or the member's.

Each case is a ``Status`` as a Kubernetes API server builds it (the shapes are quoted in
:mod:`fleet.members.refusals`), read through :func:`fleet.members.errors.classify` as a member
call reads it; the last test sends real creates to a simulated member that refuses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from fleet.ascend import ASCENDJOB_KIND
from fleet.members import MemberRefused, Scope, load_members, scope_of
from fleet.members.errors import classify
from fleet.members.refusals import describe
from fleet.sim.faults import REFUSALS
from tests.fleet.placement.factory import job
from tests.support.kinds import JOBS
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

NAME = "train"


def _refusal(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> MemberRefused:
    error = ApiException(status=code, reason="whatever the HTTP reason phrase says")
    body: dict[str, Any] = {"kind": "Status", "status": "Failure", "code": code, "reason": reason}
    body["message"] = message
    if details is not None:
        body["details"] = details
    error.body = json.dumps(body)
    refused = classify("m1", "create_job", error)
    assert isinstance(refused, MemberRefused)
    return refused


def _cause(reason: str, field: str = "spec") -> dict[str, str]:
    return {"reason": reason, "message": "Invalid value: 1: must be 2", "field": field}


def _invalid(*causes: dict[str, str], kind: str = ASCENDJOB_KIND, prefix: str = "") -> MemberRefused:
    """``apierrors.NewInvalid``: the API server's own validation of the object."""
    return _refusal(
        422,
        "Invalid",
        f'{prefix}AscendJob.mindxdl.gitee.com "{NAME}" is invalid: spec: Invalid value: 1: must be 2',
        {"name": NAME, "group": "mindxdl.gitee.com", "kind": kind, "causes": list(causes)},
    )


@pytest.mark.parametrize(
    "causes",
    [
        # A label Fleet set is too long (metadata validation, the same on every API server).
        [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "j-xxxx": must be no more than 63 characters',
                "field": "metadata.labels",
            }
        ],
        # The CRD's schema: a type, a required field, an enum.
        [_cause("FieldValueTypeInvalid"), _cause("FieldValueRequired", "spec.replicaSpecs")],
        [_cause("FieldValueNotSupported"), _cause("FieldValueTooLong"), _cause("FieldValueTooMany")],
        [_cause("FieldValueDuplicate")],
    ],
)
def test_the_api_servers_own_validation_of_the_object_is_the_jobs_fault(causes: list[dict[str, str]]) -> None:
    error = _invalid(*causes)
    assert scope_of(error, kind=ASCENDJOB_KIND) is Scope.JOB
    assert describe(error) == f'422 Invalid: AscendJob.mindxdl.gitee.com "{NAME}" is invalid: ' + (
        "spec: Invalid value: 1: must be 2"
    )


@pytest.mark.parametrize(
    ("why", "error"),
    [
        # A cause that depends on the cluster: a feature gate off, an object missing, its own bug.
        ("forbidden field", _invalid(_cause("FieldValueInvalid"), _cause("FieldValueForbidden"))),
        ("referenced object missing", _invalid(_cause("FieldValueNotFound"))),
        ("internal error", _invalid(_cause("InternalError"))),
        ("no causes", _invalid()),
        # Another object than the job was found invalid (the namespace Fleet creates first).
        ("another kind", _invalid(_cause("FieldValueInvalid"), kind="Namespace")),
        # A kubebuilder webhook answering with NewInvalid: 422 and field causes, through admission.
        (
            "webhook with field causes",
            _invalid(
                _cause("FieldValueInvalid"),
                prefix='admission webhook "vascendjob.kb.io" denied the request: ',
            ),
        ),
        # A ValidatingAdmissionPolicy: 422 Invalid by default, built by admission.NewForbidden.
        (
            "validating admission policy",
            _refusal(
                422,
                "Invalid",
                f'ascendjobs.mindxdl.gitee.com "{NAME}" is forbidden: ValidatingAdmissionPolicy '
                "'no-big-jobs' with binding 'no-big-jobs' denied request: too many NPUs here",
                {
                    "name": NAME,
                    "group": "mindxdl.gitee.com",
                    "kind": "ascendjobs",
                    "causes": [{"message": "ValidatingAdmissionPolicy 'no-big-jobs' ... denied request"}],
                },
            ),
        ),
        (
            "rbac",
            _refusal(
                403,
                "Forbidden",
                'ascendjobs.mindxdl.gitee.com is forbidden: User "fleet" cannot create resource "ascendjobs" '
                'in API group "mindxdl.gitee.com" in the namespace "team-a"',
                {"group": "mindxdl.gitee.com", "kind": "ascendjobs"},
            ),
        ),
        (
            "gatekeeper",
            _refusal(
                403, "Forbidden", 'admission webhook "validation.gatekeeper.sh" denied the request: [x] no'
            ),
        ),
        (
            "kyverno (no code, no reason)",
            _refusal(400, "", 'admission webhook "validate.kyverno.svc" denied the request'),
        ),
        (
            "crd not installed",
            _refusal(404, "NotFound", "the server could not find the requested resource", {}),
        ),
        (
            "name taken",
            _refusal(409, "AlreadyExists", f'ascendjobs.mindxdl.gitee.com "{NAME}" already exists'),
        ),
        ("unauthorized", _refusal(401, "Unauthorized", "Unauthorized")),
        ("too large for this server", _refusal(413, "RequestEntityTooLarge", "request entity too large")),
        (
            "strict decoding of an older CRD",
            _refusal(400, "BadRequest", 'strict decoding error: unknown field "spec.x"'),
        ),
    ],
)
def test_a_refusal_of_the_members_own_is_the_members(why: str, error: MemberRefused) -> None:
    assert scope_of(error, kind=ASCENDJOB_KIND) is Scope.MEMBER, why


@pytest.mark.parametrize(
    "error",
    [
        _refusal(
            403,
            "Forbidden",
            f'ascendjobs.mindxdl.gitee.com "{NAME}" is forbidden: unable to create new content in namespace '
            "team-a because it is being terminated",
            {
                "name": NAME,
                "group": "mindxdl.gitee.com",
                "kind": "ascendjobs",
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": "namespace team-a is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            },
        ),
        _refusal(
            403,
            "Forbidden",
            f'ascendjobs.mindxdl.gitee.com "{NAME}" is forbidden: exceeded quota: jobs, requested: '
            "count/ascendjobs.mindxdl.gitee.com=1, used: count/ascendjobs.mindxdl.gitee.com=10, "
            "limited: count/ascendjobs.mindxdl.gitee.com=10",
            {"name": NAME, "group": "mindxdl.gitee.com", "kind": "ascendjobs"},
        ),
    ],
)
def test_a_passing_refusal_of_the_member_is_the_members_for_now(error: MemberRefused) -> None:
    assert scope_of(error, kind=ASCENDJOB_KIND) is Scope.MEMBER_FOR_NOW


@pytest.fixture(scope="module")
def refusing_member() -> Iterator[RunningSim]:
    with running_sim(small_topology({"m1": CARD_POOL})) as sim:
        yield sim


@pytest.mark.integration
@pytest.mark.parametrize(
    ("refusal", "scope", "code"),
    [
        ("invalid", Scope.JOB, 422),
        ("forbidden", Scope.MEMBER, 403),
        ("webhook", Scope.MEMBER, 403),
        ("policy", Scope.MEMBER, 422),
        ("no-crd", Scope.MEMBER, 404),
    ],
)
def test_the_simulated_members_refusals_as_fleet_reads_them(
    refusing_member: RunningSim, refusal: str, scope: Scope, code: int
) -> None:
    assert set(REFUSALS) == {"invalid", "forbidden", "webhook", "policy", "no-crd"}
    name = f"refused-{refusal}"
    refusing_member.fault("m1", "refuse-create", refusal=refusal, job=f"default/{name}")
    members = load_members(refusing_member.kubeconfig)
    try:
        member = members["m1"]
        body = job(name, workers=0, npus=1)
        body["metadata"]["namespace"] = "default"
        with pytest.raises(MemberRefused) as refused:
            member.create_job(JOBS, "default", body)
        assert refused.value.code == code
        assert scope_of(refused.value, kind=ASCENDJOB_KIND) is scope
        # Only that job is refused: another one is created.
        other = job(f"{name}-other", workers=0, npus=1)
        other["metadata"]["namespace"] = "default"
        assert member.create_job(JOBS, "default", other)["metadata"]["name"] == f"{name}-other"
    finally:
        for m in members.values():
            m.close()


@pytest.mark.integration
def test_a_refusal_for_every_job_ends_with_ok_and_a_bad_one_is_refused(refusing_member: RunningSim) -> None:
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as bad:
        refusing_member.fault("m1", "refuse-create", refusal="teapot")
    assert bad.value.code == 400 and "refusal:" in bad.value.read().decode()
    refusing_member.fault("m1", "ok")  # the refusals of the tests before
    state = refusing_member.fault("m1", "refuse-create", refusal="no-crd")
    assert state["refusals"] == {"*": "no-crd"}
    members = load_members(refusing_member.kubeconfig)
    try:
        body = job("any-job", workers=0, npus=1)
        body["metadata"]["namespace"] = "default"
        with pytest.raises(MemberRefused) as refused:
            members["m1"].create_job(JOBS, "default", body)
        assert refused.value.code == 404
        assert refusing_member.fault("m1", "ok")["refusals"] == {}
        assert members["m1"].create_job(JOBS, "default", body)["metadata"]["name"] == "any-job"
    finally:
        for m in members.values():
            m.close()
