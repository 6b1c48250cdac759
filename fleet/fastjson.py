"""JSON on the hot paths: orjson, with the standard library behind it for what orjson refuses.

Every stored object is encoded on each write and decoded on each read, every member watch line
and response is parsed, every API response and watch event is serialized: with the standard
library that was the largest single cost of the dispatcher, the syncer and the API (a quarter
to a third of their CPU under load). orjson does the same work several times faster.

Where the two differ, the behaviour is the Kubernetes API server's for unstructured objects:

* an integer beyond 64 bits: orjson refuses to write it, so :func:`dumps` falls back to the
  standard library; reading it back gives a float, as the API server's own decoding of a
  custom resource does;
* input orjson refuses (``NaN``, a lone surrogate): :func:`loads` hands it to the standard
  library, so what it accepts and the error it raises are as before.

Output is compact (no spaces), keys in insertion order, UTF-8 (not ``\\u`` escapes).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def dumps(value: Any) -> bytes:
    """Compact JSON bytes of ``value``."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The value ``data`` holds; ``json.JSONDecodeError`` (a ``ValueError``) when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)
