"""The hot-path JSON codec: as fast as orjson, as lenient and exact as the standard library where
orjson would refuse or differ."""

from __future__ import annotations

import json
import math

import pytest

from fleet import fastjson


def test_round_trip_is_compact_utf8_in_insertion_order() -> None:
    value = {"b": 1, "a": [1.5, None, True], "name": "训练-job", "nested": {"z": "", "y": -3}}
    data = fastjson.dumps(value)
    assert data == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert fastjson.loads(data) == value
    assert list(fastjson.loads(data)) == ["b", "a", "name", "nested"]


def test_an_integer_beyond_64_bits_is_written_and_read_back_as_the_api_server_reads_it() -> None:
    big = 2**70
    data = fastjson.dumps({"n": big, "small": 2**63 - 1})
    assert json.loads(data) == {"n": big, "small": 2**63 - 1}  # the bytes hold the exact number
    read = fastjson.loads(data)
    assert read["small"] == 2**63 - 1
    assert read["n"] == float(big)  # a float, as Kubernetes decodes an unstructured object


def test_what_orjson_refuses_to_read_the_standard_library_still_reads() -> None:
    assert math.isnan(fastjson.loads("NaN"))
    assert fastjson.loads(memoryview(b'{"a": 1}')) == {"a": 1}


def test_input_that_is_not_json_raises_the_standard_error() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        fastjson.loads(b'{"a": ')
    assert isinstance(info.value, ValueError)
    assert "Expecting value" in str(info.value)  # the standard library's message, as before
