"""The protobuf bodies kubectl's typed clients send, read as JSON; one this server cannot read is refused."""

from __future__ import annotations

import pytest

from fleet.apiserver.protobuf import ProtobufError, decode


def field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def envelope(kind: str, raw: bytes) -> bytes:
    type_meta = field(1, b"authorization.k8s.io/v1") + field(2, kind.encode())
    return b"k8s\x00" + field(1, type_meta) + field(2, raw)


def test_an_access_review_as_kubectl_sends_it() -> None:
    attributes = (
        field(1, b"team-a") + field(2, b"create") + field(3, b"mindxdl.gitee.com") + field(5, b"ascendjobs")
    )
    raw = field(1, b"") + field(2, field(1, attributes)) + bytes([3 << 3, 1])  # a varint field skipped
    assert decode(envelope("SelfSubjectAccessReview", raw)) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {},
        "spec": {
            "resourceAttributes": {
                "namespace": "team-a",
                "verb": "create",
                "group": "mindxdl.gitee.com",
                "resource": "ascendjobs",
            }
        },
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{}", "protobuf prefix"),
        (b"k8s\x00\x12\x7f", "truncated"),
        (envelope("Pod", b""), "not read as protobuf here"),
    ],
)
def test_a_body_it_cannot_read_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode(data)
