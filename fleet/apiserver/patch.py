"""The three PATCH flavours Kubernetes accepts, applied to plain JSON objects.

* JSON merge patch (RFC 7386): maps merge, ``null`` deletes, lists are replaced.
* JSON patch (RFC 6902): ``add``/``remove``/``replace``/``move``/``copy``/``test`` at JSON pointers,
  by the maintained ``jsonpatch`` library (as Kubernetes uses evanphx/json-patch).
* Strategic merge patch: a merge patch that knows, per field path, whether a list merges and by
  which key (``conditions`` by ``type``, ``containers`` by ``name``...), and honours the
  directives kubectl emits: ``$patch: replace|delete|merge``, ``$retainKeys``,
  ``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>``. Lists without a rule are
  replaced, as for a field without a patch strategy in Kubernetes (for example Node ``taints``,
  which kubectl therefore always sends whole).

Failures raise the errors Kubernetes answers with: a malformed patch is ``BadRequest``, a patch
that cannot be applied (a failed ``test``, a missing path) is ``Invalid`` (422). A JSON patch is
bounded as the API server bounds it (:mod:`fleet.apiserver.bodies`): at most 10000 operations and
3 MiB copied by its ``copy`` operations (413), and one that builds a document nested too deeply
for the copying to follow is a ``BadRequest``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonpatch
import jsonpointer

from fleet.apiserver.bodies import (
    JSON_PATCH_MAX_COPY_BYTES,
    MAX_JSON_PATCH_OPERATIONS,
    encoded_size,
    too_deep,
)
from fleet.apiserver.errors import BadRequest, Invalid, RequestEntityTooLarge

__all__ = [
    "MergeRule",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
]

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


@dataclass(frozen=True)
class MergeRule:
    """How a list field merges under strategic merge patch.

    ``merge_key`` names the key identifying items of a list of objects; ``None`` with
    ``merge=True`` is a list of scalars merged as a set (``finalizers``).
    """

    merge_key: str | None = None
    merge: bool = True
    retain_keys: bool = False


# --- JSON merge patch ---------------------------------------------------------------------------


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386. ``target`` is not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# --- JSON patch ---------------------------------------------------------------------------------


def apply_json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 by the ``jsonpatch`` library, all or nothing; ``target`` is not modified.

    Operations are applied one at a time so that the API server's bounds hold (at most
    :data:`MAX_JSON_PATCH_OPERATIONS`, :data:`JSON_PATCH_MAX_COPY_BYTES` copied, as
    ``k8s.io/apiserver``'s patcher bounds evanphx/json-patch) and a failure names its operation.
    """
    if not isinstance(operations, list):
        raise BadRequest("json patch: the patch must be a JSON array of operations")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise RequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(operations)}"
        )
    try:
        return _apply_operations(copy.deepcopy(target), operations)
    except RecursionError:  # moves and adds can nest a document deeper than copying can follow
        raise too_deep() from None


_OPS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def _apply_operations(doc: Any, operations: list[Any]) -> Any:
    copied = 0
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise BadRequest(f"json patch: operation {number} must be an object with 'op' and 'path'")
        op, path = operation["op"], operation["path"]
        if op not in _OPS:
            raise BadRequest(f"json patch: operation {number}: unknown op {op!r}")
        for field in ("path", "from"):
            pointer = operation.get(field, "")
            if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
                raise BadRequest(
                    f"json patch: operation {number} ({op}): {field!r} must be a JSON pointer "
                    f"(empty or starting with '/'), not {pointer!r}"
                )
        try:
            if op == "copy":
                copied += encoded_size(jsonpointer.resolve_pointer(doc, operation["from"]))
                if copied > JSON_PATCH_MAX_COPY_BYTES:
                    raise RequestEntityTooLarge(
                        f"json patch: the copy operations would copy more than the limit of "
                        f"{JSON_PATCH_MAX_COPY_BYTES} bytes"
                    )
            doc = jsonpatch.JsonPatch([operation]).apply(doc, in_place=True)
        # The library's messages may quote the document; a message here names only the operation.
        except jsonpatch.JsonPatchTestFailed:
            expected = operation["value"]
            raise Invalid(f"json patch: test operation failed: {path} is not {expected!r}") from None
        except jsonpatch.InvalidJsonPatch as error:  # about the operation itself ('value' missing...)
            raise BadRequest(f"json patch: operation {number} ({op}): {error}") from None
        except (jsonpatch.JsonPatchPathNotFound, jsonpointer.JsonPointerException):
            where = f"{operation['from']} or {path}" if op in ("move", "copy") else path
            raise Invalid(f"json patch: operation {number} ({op}): {where}: path does not exist") from None
        except jsonpatch.JsonPatchConflict:
            raise Invalid(f"json patch: operation {number} ({op}): cannot {op} at {path}") from None
    return doc


# --- strategic merge patch ----------------------------------------------------------------------


def apply_strategic_merge_patch(target: Any, patch: Any, rules: Mapping[str, MergeRule]) -> Any:
    """Strategic merge patch of ``target`` with the per-path ``rules``; ``target`` is unchanged."""
    if not isinstance(patch, dict):
        raise BadRequest("strategic merge patch: the patch must be a JSON object")
    result = _merge_map(copy.deepcopy(target) if isinstance(target, dict) else {}, patch, rules, "")
    if result is None:
        raise BadRequest("strategic merge patch: $patch: delete of the whole object is not allowed")
    return result


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _strip(value: Any) -> Any:
    """A patch value with its directives removed, for places where it replaces a value whole."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if k not in (_PATCH, _RETAIN) and not k.startswith((_ORDER, _DELETE_PRIMITIVE)) and v is not None
        }
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get(_PATCH) == "delete")]
    return value


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], rules: Mapping[str, MergeRule], path: str
) -> dict[str, Any] | None:
    directive = patch.get(_PATCH, "merge")
    if directive == "delete":
        return None
    if directive == "replace":
        return dict(_strip(patch))
    if directive != "merge":
        raise BadRequest(f"strategic merge patch: {path or '<root>'}: unknown $patch directive {directive!r}")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            if not isinstance(value, list):
                raise BadRequest(f"strategic merge patch: {_child(path, key)} must be a list")
            orders[key[len(_ORDER) :]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if not isinstance(value, list):
                raise BadRequest(f"strategic merge patch: {_child(path, key)} must be a list")
            current = original.get(field)
            if isinstance(current, list):
                original[field] = [item for item in current if item not in value]
            continue
        child = _child(path, key)
        if value is None:
            original.pop(key, None)
        elif isinstance(value, dict):
            current = original.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value, rules, child)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list):
            original[key] = _merge_list(original.get(key), value, rules.get(child), rules, child)
        else:
            original[key] = value
    for field, order in orders.items():
        current = original.get(field)
        if isinstance(current, list):
            original[field] = _reorder(current, order, rules.get(_child(path, field)))
    retain = patch.get(_RETAIN)
    if isinstance(retain, list):
        for key in [k for k in original if k not in retain]:
            del original[key]
    return original


def _merge_list(
    current: Any, patch: list[Any], rule: MergeRule | None, rules: Mapping[str, MergeRule], path: str
) -> list[Any]:
    if rule is None or not rule.merge or not isinstance(current, list):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and _PATCH in item)]
    if any(isinstance(item, dict) and item.get(_PATCH) == "replace" for item in patch):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and _PATCH in item)]
    if rule.merge_key is None:
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = rule.merge_key
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise BadRequest(f"strategic merge patch: {path}: every item needs the merge key {key!r}")
        position = next(
            (
                i
                for i, existing in enumerate(merged)
                if isinstance(existing, dict) and existing.get(key) == item[key]
            ),
            None,
        )
        if item.get(_PATCH) == "delete":
            merged = [m for m in merged if not (isinstance(m, dict) and m.get(key) == item[key])]
        elif position is None:
            merged.append(_strip(item))
        else:
            result = _merge_map(merged[position], item, rules, path)
            if result is None:
                del merged[position]
            else:
                merged[position] = result
    return merged


def _reorder(items: list[Any], order: list[Any], rule: MergeRule | None) -> list[Any]:
    """Items named by ``$setElementOrder`` first, in its order; the others after, as they were."""
    key = rule.merge_key if rule else None

    def identity(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [identity(entry) if key is not None else entry for entry in order]
    first = [item for ident in wanted for item in items if identity(item) == ident]
    rest = [item for item in items if identity(item) not in wanted]
    return first + rest
