"""What a failed member call may say where others read it: what happened, never where.

:func:`~fleet.members.errors.safe_message` is the one way a member failure becomes a status
message or an Event; :func:`~fleet.members.errors.redact` takes addresses, credentials and paths
out of free text. The failures here are real ones (a port nobody listens on, a server that never
answers, a name that does not resolve, TLS against a plain server, 503 and 422 answers), made
through the official client, so the test sees the words urllib3 really uses.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from fleet.members import MemberError, MemberRefused, MemberSettings, MemberUnavailable, load_members
from fleet.members.errors import MESSAGE_LIMIT, classify, redact, safe_message
from tests.fleet.members.conftest import FAST, MemberServer, member_for
from tests.fleet.members.kubeconfig import TOKEN, write_kubeconfig
from tests.support.kinds import JOBS
from tests.support.net import free_port

ONCE = MemberSettings(
    connect_timeout=0.5,
    request_timeout=0.5,
    attempts=1,
    backoff_initial=0.01,
    backoff_max=0.01,
    probe_timeout=0.5,
)


def _no_address(text: str, *hosts: str) -> None:
    for needle in ("127.0.0.1", "localhost", "://", "host=", "port=", TOKEN, *hosts):
        assert needle not in text, (needle, text)


# ---- redact -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Internal error: failed calling webhook: Post "https://webhook.ns.svc:443/validate?timeout=10s": '
            "dial tcp 10.96.0.12:443: connect: connection refused",
            'Internal error: failed calling webhook: Post "<address>": dial tcp <address>: connect: '
            "connection refused",
        ),
        (
            "HTTPConnectionPool(host='member-1.internal.example', port=6443): Max retries exceeded",
            "HTTPConnectionPool(host=<address>, port=<port>): Max retries exceeded",
        ),
        ("dial tcp [fd00::1]:6443: i/o timeout", "dial tcp <address>: i/o timeout"),
        ("member-1.internal.example:6443 is down.", "<address> is down."),
        ("localhost:8080 refused", "<address> refused"),
        ("seen at 10.0.0.1.", "seen at <address>."),
        ("redis://:secret@10.0.0.2:6379/0", "<address>"),
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer <redacted>"),
        ("token=s3cr3t&x=1", "token=<redacted>&x=1"),
        ('{"password": "hunter2"}', '{"password": "<redacted>"}'),
        ("kubeconfig /home/ops/.kube/members.yaml: context m: bad", "kubeconfig <path>: context m: bad"),
    ],
)
def test_addresses_credentials_and_paths_are_taken_out(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "spec.replicaSpecs[Worker].replicas: Invalid value: 2: must be at least 1",
        'spec.containers[0].image: Invalid value: "python:3.11"',
        'ascendjobs.mindxdl.gitee.com "team-a/job1" not found',
        "GET /apis/mindxdl.gitee.com/v1/namespaces/team-a/ascendjobs failed at 12:30:45",
        "the server is currently unable to handle the request (injected fault)",
        "continue token kept expiring; list restarted 3 times",
    ],
)
def test_what_a_member_says_about_a_job_is_kept(text: str) -> None:
    assert redact(text) == text


# ---- safe_message on real failures ------------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung API server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield int(sock.getsockname()[1])
    sock.close()


@pytest.fixture
def plain_port() -> Iterator[int]:
    """A port that answers anything with plain HTTP, as a member behind the wrong scheme would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(sock.getsockname()[1])
    stop.set()
    thread.join(2)
    sock.close()


def _failure(server: str, tmp_path: Path) -> MemberError:
    member = load_members(write_kubeconfig(tmp_path / "kc", {"m": server}), settings=ONCE)["m"]
    try:
        with pytest.raises(MemberError) as caught:
            member.get_job(JOBS, "team-a", "job")
        return caught.value
    finally:
        member.close()


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("refused", "get_job: unavailable: connection refused"),
        ("silent", "get_job: unavailable: timed out waiting for an answer"),
        ("unresolvable", "get_job: unavailable: name resolution failed"),
        ("plain", "get_job: unavailable: TLS handshake failed"),
    ],
)
def test_a_member_without_an_answer_is_described_without_its_address(
    kind: str, says: str, tmp_path: Path, silent_port: int, plain_port: int
) -> None:
    port = {"refused": free_port(), "silent": silent_port, "plain": plain_port, "unresolvable": 6443}[kind]
    host = "no-such-member.invalid" if kind == "unresolvable" else "127.0.0.1"
    scheme = "https" if kind == "plain" else "http"
    error = _failure(f"{scheme}://{host}:{port}", tmp_path)
    assert isinstance(error, MemberUnavailable) and error.status is None
    if kind != "plain":  # (the client keeps only OpenSSL's words of a TLS failure)
        assert host in str(error)  # the log keeps the whole story...
    assert safe_message(error) == says  # ...others read what happened
    _no_address(safe_message(error), host, str(port))


def test_a_member_in_trouble_is_described_by_its_answer(member_server: MemberServer, tmp_path: Path) -> None:
    member = member_for(member_server, tmp_path, FAST)
    member_server.faults.fail(503, times=FAST.attempts, path="/ascendjobs")
    with pytest.raises(MemberUnavailable) as caught:
        member.list_jobs(JOBS)
    message = safe_message(caught.value)
    assert message.startswith("list_ascendjobs: unavailable: 503 ServiceUnavailable")
    _no_address(message, str(member_server.port))
    member.close()


def test_probes_say_what_failed_and_keep_the_address_for_the_log(
    member_server: MemberServer, tmp_path: Path, silent_port: int
) -> None:
    member = member_for(member_server, tmp_path, FAST)
    member_server.faults.fail(503, times=1, path="/readyz")
    failing = member.probe()
    assert not failing.healthy and failing.error is not None and failing.detail is not None
    assert failing.error.startswith("probe: unavailable: 503 ServiceUnavailable")
    member.close()
    for port, says in ((free_port(), "connection refused"), (silent_port, "timed out waiting for an answer")):
        gone = load_members(
            write_kubeconfig(tmp_path / f"kc{port}", {"m": f"http://127.0.0.1:{port}"}), settings=FAST
        )
        probe = gone["m"].probe()
        assert probe.error == f"probe: unavailable: {says}"
        assert probe.detail is not None and str(port) in probe.detail
        _no_address(probe.error, str(port))
        gone["m"].close()


def _api_error(status: int, reason: str, message: str) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "code": status, "reason": reason, "message": message})
    return error


def test_a_refusal_keeps_the_members_reason_without_addresses() -> None:
    error = classify(
        "m",
        "create_job",
        _api_error(
            422,
            "Invalid",
            'AscendJob "job" is invalid: spec.replicaSpecs[Master].replicas: Invalid value: 2; '
            'admission webhook "v.ascend" at https://10.0.0.7:9443/validate denied it',
        ),
    )
    assert isinstance(error, MemberRefused)
    assert safe_message(error) == (
        'create_job: refused 422 Invalid: AscendJob "job" is invalid: spec.replicaSpecs[Master].replicas: '
        'Invalid value: 2; admission webhook "v.ascend" at <address> denied it'
    )
    assert "10.0.0.7:9443" in str(error)  # the role's log keeps it


def test_an_error_of_the_members_server_is_redacted() -> None:
    error = classify(
        "m",
        "get_job",
        _api_error(503, "ServiceUnavailable", "etcd at 10.1.2.3:2379 is unreachable"),
    )
    assert (
        safe_message(error)
        == "get_job: unavailable: 503 ServiceUnavailable: etcd at <address> is unreachable"
    )


def test_any_other_failure_says_its_type_and_its_words_redacted() -> None:
    made_here = MemberUnavailable("m", "evict", "the copy of attempt 2 is still being deleted")
    assert safe_message(made_here) == "evict: unavailable: the copy of attempt 2 is still being deleted"
    config = ValueError("kubeconfig /etc/fleet/members.kubeconfig: context m: token=abc no server")
    assert safe_message(config) == "ValueError: kubeconfig <path>: context m: token=<redacted> no server"
    assert (
        safe_message(ConnectionRefusedError(111, "Connection refused")) == "unavailable: connection refused"
    )
    assert safe_message(RuntimeError()) == "RuntimeError"
    long = safe_message(ValueError("x" * 5000))
    assert len(long) == MESSAGE_LIMIT and long.endswith("...")
