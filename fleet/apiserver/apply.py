"""Server-side apply: field managers, ``managedFields`` and conflicts, as kube-apiserver keeps them.

Kubernetes' semantics (the "Server-Side Apply" page of the Kubernetes docs, and its
implementation, kubernetes-sigs/structured-merge-diff): every write records which *manager*
owns which fields in ``metadata.managedFields``, one entry per manager and operation, the fields
as a ``FieldsV1`` set (``{"f:spec": {"f:replicas": {}}}``).

* An **apply** (``PATCH`` with ``application/apply-patch+yaml``, ``fieldManager`` required)
  sends the manager's whole intent. Each field it sets that another manager owns with a
  different value is a **conflict**: 409, naming the field and the manager, unless ``force=true``,
  which takes the field over. Setting a field to the value it has already makes the ownership
  shared. The object becomes the current object with the applied fields set; a field the manager
  applied before and no longer applies is removed, unless another manager owns it too. The
  manager's set becomes exactly what it applied. An apply that changes nothing changes nothing:
  no write, no new resourceVersion (``kubectl apply --server-side`` twice).
* An **update** (create, ``PUT``, other patches) takes every field it changes for its manager
  (``fieldManager``, else the client's User-Agent name, as Kubernetes defaults it), away from the
  others.

Which fields are fields: what structured-merge-diff does for a schema that does not type its
lists (the "deduced" schema of a custom resource without ``x-kubernetes-list-type``): maps are
granular (each key a field), lists and scalars are atomic (one field each). ``apiVersion``,
``kind``, ``status`` (of a kind with a status subresource) and ``metadata`` other than labels
and annotations are never owned. Unlike Kubernetes, core kinds' lists are atomic too (no merge
keys): two managers of one Pod's containers conflict rather than share the list.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from fleet.apiserver.errors import BadRequest, Cause, Conflict
from fleet.apiserver.resources import Obj
from fleet.timestamps import now_rfc3339

__all__ = [
    "APPLY_PATCH",
    "apply",
    "default_manager",
    "fields_v1",
    "owned_paths",
    "record_update",
    "same_object",
]

#: The media type of an apply request (YAML; JSON is YAML).
APPLY_PATCH: Final = "application/apply-patch+yaml"

Path = tuple[str, ...]
#: The metadata a manager may own.
_OWNED_METADATA: Final = ("labels", "annotations")
_MISSING: Final = object()


def default_manager(user_agent: str) -> str:
    """The manager of a write that names none: the User-Agent's program (``kubectl-edit``...)."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


def _leaves(value: Any, prefix: Path) -> Iterable[Path]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaves(child, (*prefix, str(key)))
    else:
        yield prefix


def owned_paths(obj: Mapping[str, Any], *, with_status: bool) -> set[Path]:
    """The fields of ``obj`` a manager can own (see the module docstring)."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and not with_status):
            continue
        if key == "metadata":
            for part in _OWNED_METADATA:
                entries = (value or {}).get(part) if isinstance(value, dict) else None
                if isinstance(entries, dict):
                    out.update(("metadata", part, str(k)) for k in entries)
            continue
        out.update(_leaves(value, (key,)))
    return out


def _get(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: Obj, path: Path, value: Any) -> None:
    for key in path[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            child = obj[key] = {}
        obj = child
    obj[path[-1]] = copy.deepcopy(value)


def _remove(obj: Obj, path: Path) -> None:
    """Remove the field, and the maps it leaves empty."""
    parents: list[tuple[Obj, str]] = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key] == {}:
            del parent[key]
        else:
            break


def fields_v1(paths: Iterable[Path]) -> Obj:
    """Paths as a ``FieldsV1`` set: ``{"f:spec": {"f:replicas": {}}}``."""
    out: Obj = {}
    for path in sorted(paths):
        node = out
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return out


def _paths(fields: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    for key, child in fields.items():
        if not isinstance(key, str) or not key.startswith("f:"):
            continue  # "." (the node itself) and list keys are not produced here
        path = (*prefix, key[2:])
        below = _paths(child, path)
        out |= below or {path}
    return out


def _entries(obj: Mapping[str, Any]) -> list[Obj]:
    managed = (obj.get("metadata") or {}).get("managedFields")
    return [dict(e) for e in managed if isinstance(e, dict)] if isinstance(managed, list) else []


def _owners(entries: list[Obj]) -> dict[tuple[str, str], set[Path]]:
    return {
        (str(e.get("manager", "")), str(e.get("operation", ""))): _paths(e.get("fieldsV1")) for e in entries
    }


def _write(
    obj: Obj,
    entries: list[Obj],
    owners: Mapping[tuple[str, str], set[Path]],
    changed: set[tuple[str, str]],
    api_version: str,
) -> None:
    """``metadata.managedFields`` from ``owners``, keeping the entries' order and times where
    their set did not change; empty sets are dropped."""
    out: list[Obj] = []
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        key = (str(entry.get("manager", "")), str(entry.get("operation", "")))
        seen.add(key)
        paths = owners.get(key)
        if not paths:
            continue
        if key in changed:
            stamp = now_rfc3339()
            out.append({**entry, "apiVersion": api_version, "time": stamp, "fieldsV1": fields_v1(paths)})
        else:
            out.append(entry)
    for key, paths in owners.items():
        if key not in seen and paths:
            manager, operation = key
            out.append(
                {
                    "manager": manager,
                    "operation": operation,
                    "apiVersion": api_version,
                    "time": now_rfc3339(),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(paths),
                }
            )
    meta = obj.setdefault("metadata", {})
    if out:
        meta["managedFields"] = out
    else:
        meta.pop("managedFields", None)


def _dotted(path: Path) -> str:
    return "".join(f".{p}" for p in path)


def apply(
    current: Obj | None,
    config: Obj,
    *,
    manager: str,
    force: bool,
    api_version: str,
    with_status: bool = False,
) -> Obj:
    """The object after ``manager`` applies ``config`` to ``current`` (``None``: it is created).

    Raises ``Conflict`` (409, one ``FieldManagerConflict`` cause per field) when another manager
    owns a field ``config`` sets to another value and ``force`` is false.
    """
    if not manager:
        raise BadRequest(
            "PATCH with apply requires fieldManager: fieldManager is required for apply requests"
        )
    base: Obj = copy.deepcopy(current) if current is not None else {}
    entries = _entries(base)
    owners = _owners(entries)
    mine = (manager, "Apply")
    wanted = owned_paths(config, with_status=with_status)
    conflicts: list[tuple[str, Path]] = []
    for path in sorted(wanted):
        value = _get(config, path)
        for key, paths in owners.items():
            if key != mine and path in paths and _get(base, path) != value:
                conflicts.append((key[0], path))
    if conflicts and not force:
        causes = [
            Cause(_dotted(path), f'conflict with "{other}" using {api_version}', "FieldManagerConflict")
            for other, path in conflicts
        ]
        lines = [f"{c.message}: {c.field}" for c in causes]
        head = f"Apply failed with {len(causes)} conflict{'' if len(causes) == 1 else 's'}: "
        raise Conflict(head + ("\n".join(lines) if len(lines) > 1 else lines[0]), causes=causes)
    changed: set[tuple[str, str]] = set()
    for other, path in conflicts:  # forced: the fields change hands
        for key, paths in owners.items():
            if key[0] == other and key != mine and path in paths:
                paths.discard(path)
                changed.add(key)
    previous = owners.get(mine, set())
    result = copy.deepcopy(base)
    result.get("metadata", {}).pop("managedFields", None)
    for path in previous - wanted:
        if not any(path in paths for owner, paths in owners.items() if owner != mine):
            _remove(result, path)
    for path in sorted(wanted):
        _set(result, path, _get(config, path))
    for field in ("apiVersion", "kind"):
        if field in config:
            result[field] = config[field]
    for field in ("name", "namespace"):
        value = (config.get("metadata") or {}).get(field)
        if value and field not in result.setdefault("metadata", {}):
            result["metadata"][field] = value
    if previous != wanted:
        owners[mine] = wanted
        changed.add(mine)
    _write(result, entries, owners, changed, api_version)
    return result


def record_update(
    old: Mapping[str, Any] | None, new: Obj, *, manager: str, api_version: str, with_status: bool = False
) -> None:
    """Give ``manager`` (operation Update) the fields ``new`` changes from ``old`` (all of them on
    create), taken from other managers; fields ``new`` drops leave every manager. ``new``'s
    ``managedFields`` are kept when the request sent them, else carried over from ``old``."""
    meta = new.setdefault("metadata", {})
    if "managedFields" not in meta and old is not None:
        inherited = (old.get("metadata") or {}).get("managedFields")
        if inherited:
            meta["managedFields"] = copy.deepcopy(inherited)
    entries = _entries(new)
    owners = _owners(entries)
    before = owned_paths(old, with_status=with_status) if old is not None else set()
    after = owned_paths(new, with_status=with_status)
    touched = {p for p in after if old is None or _get(old, p) != _get(new, p)}
    gone = before - after
    changed: set[tuple[str, str]] = set()
    for key, paths in owners.items():
        lost = paths & (touched | gone)
        if lost:
            paths.difference_update(lost)
            changed.add(key)
    if touched:
        mine = (manager, "Update")
        owners.setdefault(mine, set()).update(touched)
        changed.add(mine)
    if changed:
        _write(new, entries, owners, changed, api_version)


def same_object(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two objects are equal, metadata's server-owned fields aside (a no-op apply)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
