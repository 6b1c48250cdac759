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


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # an int32 is sign-extended to 64 bits
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@pytest.mark.parametrize(
    ("value", "default", "extra", "expected"),
    [
        (
            100000,
            False,
            field(5, b"Never") + field(4, b"first"),
            {"preemptionPolicy": "Never", "description": "first"},
        ),
        (-5, True, b"", {"globalDefault": True}),
        (0, False, b"", {}),
    ],
)
def test_a_priority_class_as_kubectl_create_sends_it(
    value: int, default: bool, extra: bytes, expected: dict[str, object]
) -> None:
    """``scheduling/v1`` PriorityClass: value 2 (always written, even 0), globalDefault 3,
    description 4, preemptionPolicy 5."""
    raw = (
        field(1, field(1, b"urgent"))
        + bytes([2 << 3])
        + varint(value)
        + bytes([3 << 3, int(default)])
        + extra
    )
    type_meta = field(1, b"scheduling.k8s.io/v1") + field(2, b"PriorityClass")
    decoded = decode(b"k8s\x00" + field(1, type_meta) + field(2, raw))
    assert decoded == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "urgent"},
        "value": value,
        **expected,
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
