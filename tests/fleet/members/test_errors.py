"""Which failures are retried, and the typed errors callers branch on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from prometheus_client import REGISTRY

from fleet.members import (
    Conflict,
    MemberRefused,
    MemberSettings,
    MemberUnavailable,
    NotFound,
    load_members,
)
from fleet.members.errors import classify, is_transient, retry_after
from tests.fleet.members.kubeconfig import write_kubeconfig
from tests.support.kinds import JOBS
from tests.support.net import free_port


def _api_error(status: int, reason: str, message: str = "", **details: object) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "code": status,
            "reason": reason,
            "message": message,
            "details": details,
        }
    )
    return error


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_throttling_and_server_trouble_are_transient(status: int) -> None:
    assert is_transient(_api_error(status, "ServiceUnavailable"))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_client_errors_are_permanent(status: int) -> None:
    assert not is_transient(_api_error(status, "Whatever"))


@pytest.mark.parametrize(
    "error",
    [
        urllib3.exceptions.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
        urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),  # type: ignore[arg-type]
        urllib3.exceptions.ProtocolError("Connection aborted", ConnectionResetError()),
        ConnectionResetError(),
    ],
)
def test_network_failures_are_transient(error: Exception) -> None:
    assert is_transient(error)
    assert isinstance(classify("m", "get_job", error), MemberUnavailable)


def test_refusals_are_typed_with_code_reason_message_and_causes() -> None:
    invalid = classify(
        "m",
        "create_job",
        _api_error(
            422, "Invalid", "AscendJob is invalid", causes=[{"field": "spec.replicas", "message": "bad"}]
        ),
    )
    assert type(invalid) is MemberRefused
    assert (invalid.code, invalid.reason, invalid.message) == (422, "Invalid", "AscendJob is invalid")
    assert invalid.causes == ("spec.replicas: bad",)
    assert "member m: create_job: refused 422 Invalid" in str(invalid)
    assert isinstance(classify("m", "get_job", _api_error(404, "NotFound")), NotFound)
    conflict = classify("m", "create_job", _api_error(409, "AlreadyExists", "exists"))
    assert isinstance(conflict, Conflict)
    assert conflict.reason == "AlreadyExists"
    unavailable = classify("m", "get_job", _api_error(503, "ServiceUnavailable", "down for maintenance"))
    assert isinstance(unavailable, MemberUnavailable)
    assert unavailable.status == 503


def test_retry_after_is_read_from_the_answer() -> None:
    error = _api_error(429, "TooManyRequests")
    error.headers = {"Retry-After": "2"}
    assert retry_after(error) == 2.0
    assert retry_after(_api_error(429, "TooManyRequests")) is None


def _errors(member: str, operation: str) -> float:
    value = REGISTRY.get_sample_value(
        "fleet_member_request_errors_total", {"member": member, "operation": operation, "code": "network"}
    )
    return value or 0.0


def test_connection_refused_is_retried_then_reported_unavailable(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    path = write_kubeconfig(tmp_path / "kc", {"refusing": f"http://127.0.0.1:{port}"})
    settings = MemberSettings(attempts=3, backoff_initial=0.01, backoff_max=0.02)
    member = load_members(path, settings=settings)["refusing"]
    before = _errors("refusing", "get_job")
    with pytest.raises(MemberUnavailable, match="member refusing: get_job: unavailable") as caught:
        member.get_job(JOBS, "default", "job")
    assert caught.value.status is None
    assert _errors("refusing", "get_job") - before == 3
    probe = member.probe()
    assert not probe.healthy
    assert probe.error is not None and "unavailable" in probe.error
    member.close()
