"""What goes between Python and Redis: write arguments, script replies, stream entries.

Shared by the sync :class:`~fleet.state.objects.Objects` and the async
:class:`~fleet.state.aio.RedisStore`, which differ only in how they wait for Redis.

An object is stored as compact JSON. Its resourceVersion is only known inside the script (it
is the counter's next value), so the JSON carries a placeholder there, unique per write, that
the script replaces by plain text substitution; no JSON is parsed in Lua.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.store import MODIFIED, already_exists, conflict, not_found, selector_view
from fleet.state.errors import Fenced
from fleet.state.keys import StateKeys, field_name, kind_name

__all__ = ["DELETE", "PUT", "Change", "Write", "decode", "decode_entry", "read_entries", "text"]

PUT: Final = "put"
DELETE: Final = "delete"


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode(raw: Any) -> Obj:
    obj: Obj = json.loads(raw)
    return obj


@dataclass(frozen=True)
class Write:
    """One call of the write script; :meth:`result` turns its reply into the stored object."""

    rt: ResourceType
    obj: Obj  # the object to store (for a delete: its last state); gets the new version
    op: str
    expected: str
    event: str
    old: Obj | None = None  # the previous version, for a MODIFIED (its selector view is kept)
    fence: tuple[str, str] | None = None

    def keys_and_args(self, keys: StateKeys, history: int) -> tuple[list[str], list[str | int]]:
        meta = self.obj["metadata"]
        placeholder = f"@rv-{uuid.uuid4().hex}@"
        meta["resourceVersion"] = placeholder
        body = json.dumps(self.obj, separators=(",", ":"))
        old = ""
        if self.event == MODIFIED and self.old is not None:
            old = json.dumps(selector_view(self.rt, self.old), separators=(",", ":"))
        fence_key, fence_token = self.fence or ("", "")
        args: list[str | int] = [
            self.op,
            kind_name(self.rt.key),
            field_name(meta.get("namespace") if self.rt.namespaced else None, meta["name"]),
            self.expected,
            body,
            self.event,
            history,
            fence_key,
            fence_token,
            placeholder,
            old,
        ]
        return [keys.version], args

    def result(self, reply: Any) -> Obj:
        """The stored object (``obj`` with its new version), or the error the reply means."""
        status, value = text(reply[0]), text(reply[1])
        name = self.obj["metadata"]["name"]
        if status == "ok":
            self.obj["metadata"]["resourceVersion"] = value
            return self.obj
        if status == "fenced":
            assert self.fence is not None
            raise Fenced(f"fence {self.fence[0]} no longer holds token {self.fence[1]}: nothing was written")
        if status == "exists":
            raise already_exists(self.rt, name)
        if status == "missing":
            raise not_found(self.rt, name)
        if status == "conflict":
            raise conflict(self.rt, name)
        raise RuntimeError(f"unexpected reply from the write script: {reply!r}")


@dataclass(frozen=True)
class Change:
    """One entry of a kind's change stream."""

    rv: int
    type: str
    object: Obj
    old: Obj | None  # the previous version's selector view (MODIFIED only)


def decode_entry(entry_id: Any, fields: Any) -> Change:
    values = {text(k): v for k, v in fields.items()}
    old = values.get("old") or b""
    return Change(
        int(text(entry_id).split("-", 1)[0]),
        text(values["type"]),
        decode(values["object"]),
        decode(old) if old else None,
    )


def read_entries(reply: Any) -> list[Any]:
    """The entries of the one stream an XREAD asked for (RESP2 list or RESP3 map), [] on timeout."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (found,) = reply.values()
        return list(found[0] if found and isinstance(found[0], list) else found)
    return list(reply[0][1])
