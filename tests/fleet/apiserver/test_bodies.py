"""The body limits of :mod:`fleet.apiserver.bodies` and the JSON patch bounds, without a server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from fleet.apiserver import bodies
from fleet.apiserver.bodies import (
    MAX_BODY_BYTES,
    MAX_DEPTH,
    check_object,
    decode,
    decode_json,
    decode_yaml,
    read_limited,
)
from fleet.apiserver.errors import BadRequest, RequestEntityTooLarge
from fleet.apiserver.patch import apply_json_patch


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def laughs(levels: int, fanout: int = 9) -> bytes:
    """The billion laughs: each level a list of ``fanout`` aliases of the one below."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("media_type", ["application/json", "application/yaml"])
def test_depth_up_to_the_limit_decodes_and_beyond_is_a_400_naming_it(media_type: str) -> None:
    assert decode(nested(MAX_DEPTH).encode(), media_type) is not None
    for depth in (MAX_DEPTH + 1, 1025, 10_000):
        with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
            decode(nested(depth).encode(), media_type)
    deep_map = ("a:\n" + "".join(" " * i + "a:\n" for i in range(1, 200))).encode()
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        decode_yaml(deep_map)
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        decode_json(b'{"a":' * 10_000 + b"1" + b"}" * 10_000)


def test_alias_bombs_are_refused_before_they_expand() -> None:
    with pytest.raises(BadRequest, match="document contains excessive aliasing"):
        decode_yaml(laughs(9))  # 387 million strings if expanded
    with pytest.raises(BadRequest, match="document contains excessive aliasing"):
        decode_yaml(laughs(4))  # 59049: past go-yaml's 99% alias share already
    with pytest.raises(BadRequest, match="anchor 'a' value contains itself"):
        decode_yaml(b"a: &a [1, *a]\n")
    # Through aliases a document may not nest past the limit either.
    deep = f"a: &a {nested(60)}\nb: {'[' * 60}*a{']' * 60}\n".encode()
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        decode_yaml(deep)
    # Few, large aliases pass the ratio; their expansion may still not pass the object limit.
    big = "x" * (MAX_BODY_BYTES // 3)
    with pytest.raises(RequestEntityTooLarge, match=f"limit is {MAX_BODY_BYTES}"):
        decode_yaml(f"a: &a {big}\nb: *a\nc: *a\nd: *a\n".encode())


def test_ordinary_aliases_timestamps_and_keys_decode_as_kubernetes_does() -> None:
    env = "[{name: A, value: '1'}, {name: B, value: '2'}]"
    document = f"""
base: &env {env}
master: {{env: *env}}
worker: {{env: *env, <<: {{image: x}}}}
created: 2024-01-01T00:00:00Z
1: one
true: yes
~: none
"""
    value = decode_yaml(document.encode())
    assert value["master"]["env"] == value["worker"]["env"] == yaml.safe_load(env)
    assert value["master"]["env"] is not value["worker"]["env"]  # copies, not shared
    assert value["worker"]["image"] == "x"
    assert value["created"] == "2024-01-01T00:00:00Z"
    assert (value["1"], value["true"], value["null"]) == ("one", True, "none")
    for bad in (b"a: !!binary aGk=\n", b"a: !!set {x}\n", b"? [a]\n: 1\n", b"a: 1\n---\nb: 2\n", b"a: *x\n"):
        with pytest.raises(BadRequest):
            decode_yaml(bad)


def test_bodies_over_the_limit_are_refused_after_a_bounded_drain() -> None:
    read_chunks: list[int] = []

    async def chunks(total: int) -> AsyncIterator[bytes]:
        for _ in range(total // 65536):
            read_chunks.append(1)
            yield b"x" * 65536

    def read(total: int, declared: str | None, expects_continue: bool = False) -> bytes:
        read_chunks.clear()
        return asyncio.run(read_limited(chunks(total), declared, expects_continue=expects_continue))

    assert len(read(MAX_BODY_BYTES, str(MAX_BODY_BYTES))) == MAX_BODY_BYTES
    with pytest.raises(RequestEntityTooLarge, match=f"limit is {MAX_BODY_BYTES}"):
        read(MAX_BODY_BYTES + 65536, None)  # chunked: read to the end, so the client reads the 413
    assert len(read_chunks) == MAX_BODY_BYTES // 65536 + 1
    with pytest.raises(RequestEntityTooLarge):
        read(100 * MAX_BODY_BYTES, None)  # dropped up to 4 times the limit, then answered
    assert len(read_chunks) == 4 * MAX_BODY_BYTES // 65536 + 1
    with pytest.raises(RequestEntityTooLarge):
        read(2 * MAX_BODY_BYTES, str(2 * MAX_BODY_BYTES), expects_continue=True)
    assert read_chunks == []  # the client waits for 100 Continue: refused before it sends


def test_json_patches_are_bounded_as_the_api_server_bounds_them() -> None:
    doc: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"a": "y" * 1000}}
    with pytest.raises(RequestEntityTooLarge, match="maximum operations in a JSON patch is 10000, got 10001"):
        apply_json_patch(doc, [{"op": "test", "path": "/metadata/name", "value": "x"}] * 10_001)
    doubling = [{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"} for i in range(30)]
    with pytest.raises(RequestEntityTooLarge, match="copy"):
        apply_json_patch(doc, doubling)
    # Moves that wrap a value ever deeper end in a 400, not in a RecursionError: when the patch
    # copies it, or when the patched object is checked.
    wrapping: list[dict[str, Any]] = [{"op": "add", "path": "/d", "value": {}}]
    for _ in range(2000):
        wrapping += [
            {"op": "add", "path": "/t", "value": {}},
            {"op": "move", "from": "/d", "path": "/t/x"},
            {"op": "move", "from": "/t", "path": "/d"},
        ]
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        check_object(apply_json_patch(doc, wrapping))
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        apply_json_patch(doc, [*wrapping, {"op": "copy", "from": "/d", "path": "/f"}])
    with pytest.raises(BadRequest, match="'from' must be a JSON pointer"):
        apply_json_patch(doc, [{"op": "move", "from": 5, "path": "/x"}])


def test_a_json_body_with_few_brackets_skips_the_walk_and_one_with_many_is_still_held_to_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The depth walk is spared only where the brackets' count bounds the depth: brackets inside
    strings never let a deep body through."""
    walked: list[object] = []
    monkeypatch.setattr(bodies, "check_depth", lambda value, limit=MAX_DEPTH: walked.append(value))
    assert decode_json(json.dumps({"spec": {"args": ["[" * 500]}}).encode()) is not None
    assert len(walked) == 1  # 500 brackets in a string: walked, and found shallow
    walked.clear()
    assert decode_json(b'{"spec": {"replicas": [1, 2, {"a": []}]}}') is not None
    assert walked == []
    monkeypatch.undo()
    hidden = ('{"s": "' + "[" * MAX_DEPTH + '", "deep": ' + nested(MAX_DEPTH + 1) + "}").encode()
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        decode_json(hidden)
    assert decode_json(nested(MAX_DEPTH).encode()) is not None
