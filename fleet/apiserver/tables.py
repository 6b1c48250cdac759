"""Table output (``meta.k8s.io/v1`` ``Table``), the way ``kubectl get`` asks for it.

kubectl sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints whatever columns
the server defines, so the server decides what ``kubectl get nodes`` looks like. Columns come from
a kind's printer columns (a JSONPath-ish path each) or, where a cell needs logic (a Pod's READY, a
Node's STATUS), from the kind's ``table_row``. Ages are rendered here as Kubernetes renders them
(``HumanDuration``): kubectl prints cells as it gets them, ``date`` columns included (checked with
kubectl 1.32), so a ``date`` column's timestamp is turned into an age server-side, as
kube-apiserver does for custom resources.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

from fleet.apiserver.errors import BadRequest
from fleet.apiserver.resources import Obj, PrinterColumn, ResourceType
from fleet.timestamps import parse_rfc3339

__all__ = [
    "TABLE_MEDIA",
    "build_table",
    "human_duration",
    "json_path",
    "partial_metadata",
    "since",
    "wants_table",
]

TABLE_MEDIA: Final = "as=Table"
_TABLE_VERSIONS: Final = frozenset({"v=v1", "v=v1beta1"})
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(-?\d+:?)\]")


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for ``Table`` (meta.k8s.io v1) before plain JSON."""
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")[1:]}
        if TABLE_MEDIA in params and "g=meta.k8s.io" in params and params & _TABLE_VERSIONS:
            return True
        if part.strip().startswith(("application/json", "*/*")) and TABLE_MEDIA not in params:
            return False
    return False


def json_path(obj: Any, path: str) -> Any:
    """Evaluate ``.a.b[0].c`` / ``.status.conditions[-1].type``; ``None`` when anything is missing.

    A slice to the end (``[-1:]``, as the Kubeflow CRDs write their State column) selects the
    elements from there on, and what follows applies to each; one element left is shown as itself,
    as kubectl's JSONPath printer shows it."""
    nodes: list[Any] = [obj]
    sliced = False
    for name, index in _SEGMENT.findall(path):
        found: list[Any] = []
        for node in nodes:
            if name:
                if isinstance(node, dict) and name in node:
                    found.append(node[name])
            elif not isinstance(node, list):
                continue
            elif index.endswith(":"):
                sliced = True
                found.extend(node[int(index[:-1]) :])
            else:
                position = int(index)
                if -len(node) <= position < len(node):
                    found.append(node[position])
        nodes = found
        if not nodes:
            return None
    if sliced and len(nodes) != 1:
        return nodes
    return nodes[0]


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``: ``45s``, ``3m20s``, ``5h10m``, ``12d``..."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def since(timestamp: Any) -> str:
    """Age of an RFC 3339 timestamp as kubectl shows it; ``<unknown>`` when absent or unreadable."""
    then = parse_rfc3339(timestamp)
    if then is None:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def partial_metadata(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def _cell(column: PrinterColumn, obj: Obj) -> Any:
    value = json_path(obj, column.path)
    if column.type == "date":
        return since(value) if value is not None else "<unknown>"
    if value is None:
        return "<none>" if column.type == "string" else None
    if column.type == "string" and not isinstance(value, str):
        return str(value)
    return value


def _row_cells(rt: ResourceType, obj: Obj) -> list[Any]:
    if rt.table_row is not None:
        return rt.table_row(obj)
    return [_cell(column, obj) for column in rt.printer_columns]


def build_table(
    rt: ResourceType,
    objects: list[Obj],
    *,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str | None = None,
    with_columns: bool = True,
) -> Obj:
    """A ``Table`` of ``objects``; ``include_object`` is ``None``, ``Metadata`` or ``Object``."""
    if include_object not in ("None", "Metadata", "Object"):
        raise BadRequest(
            f"includeObject: unsupported value {include_object!r}: must be one of None, Metadata, Object"
        )
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": _row_cells(rt, obj)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object == "Metadata":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    table["columnDefinitions"] = (
        [column.definition() for column in rt.printer_columns] if with_columns else []
    )
    table["rows"] = rows
    return table
