"""Discovery and OpenAPI documents, derived from the registry.

Discovery is served in the legacy formats (``APIVersions``, ``APIGroupList``, ``APIGroup``,
``APIResourceList``) with ``Content-Type: application/json``: kubectl 1.32 asks for aggregated
discovery first and falls back to these when the answer's content type is not the aggregated one.

OpenAPI: kubectl fetches ``/openapi/v3`` (an index of group-versions, then one document per
group-version) for ``kubectl explain`` and to learn whether the server validates fields itself:
a kind's PATCH operation, tagged with its group-version-kind, lists the ``fieldValidation``
parameter (``QueryParamVerifierV3`` in kubectl), so kubectl leaves field validation to the server
(:mod:`~fleet.apiserver.fields`) and sends ``fieldValidation`` as ``--validate`` says (``Strict``
by default). A kind with a schema (:mod:`~fleet.apiserver.schema`) is served with it in full,
``$defs`` as named components, so ``kubectl explain`` works at every depth from the very schema
that validates the kind's objects; other kinds get an open schema naming their top-level fields.
The JSON v2 document carries the same definitions; the protobuf one stays empty. A PATCH
operation lists JSON and merge patches only, even where the server takes strategic merge patches
(core kinds): kubectl computes a strategic patch from the OpenAPI v3 schema when the tagged PATCH
operation lists that type (``gvkSupportsPatchOpenAPIV3``), and the schemas carry no list merge
keys, so kubectl is left to compute it from its built-in types, as before; custom kinds get JSON
merge patches, as from a cluster.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from fleet.apiserver.resources import Obj, Registry, ResourceType
from fleet.apiserver.schema import openapi

__all__ = [
    "OPENAPI_V2_PROTOBUF",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "gv_path",
    "openapi_v2_json",
    "openapi_v2_protobuf",
    "openapi_v3_document",
    "openapi_v3_index",
]

#: What kubectl asks for (``...spec.v2@v1.0+protobuf``) and, spelled as Go's MIME parser accepts
#: it and as kube-apiserver answers, the content type of the answer.
OPENAPI_V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_STATUS_VERBS: Final = ["get", "patch", "update"]


def gv_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: a group-version's path, without the leading slash."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(group: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(registry: Registry) -> Obj:
    groups = [_group_entry(g, vs) for g, vs in registry.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    versions = registry.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource_entries(rt: ResourceType) -> list[Obj]:
    main: Obj = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    entries = [main]
    if rt.has_status:
        entries.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": _STATUS_VERBS,
            }
        )
    for sub in rt.subresources:
        entries.append(
            {
                "name": f"{rt.plural}/{sub.name}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": sub.group,
                "version": sub.version,
                "kind": sub.kind,
                "verbs": list(sub.verbs),
            }
        )
    return entries


def api_resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for rt in types for entry in _resource_entries(rt)],
    }


# --- OpenAPI ------------------------------------------------------------------------------------


#: What a PATCH operation lists (see the module doc: never the strategic merge patch type).
_PATCH_TYPES: Final = ["application/json-patch+json", "application/merge-patch+json"]


def _operation(
    operation_id: str, *, body: list[str] | None = None, collection: bool = False, writes: bool = False
) -> Obj:
    parameters: list[Obj] = [{"name": "dryRun", "in": "query", "schema": {"type": "string"}}]
    if writes:
        parameters += [
            {"name": name, "in": "query", "schema": {"type": "string"}}
            for name in ("fieldManager", "fieldValidation")
        ]
    if collection:
        for name in ("labelSelector", "fieldSelector", "continue", "resourceVersion"):
            parameters.append({"name": name, "in": "query", "schema": {"type": "string"}})
        for name in ("limit", "timeoutSeconds"):
            parameters.append({"name": name, "in": "query", "schema": {"type": "integer"}})
        parameters.append({"name": "watch", "in": "query", "schema": {"type": "boolean"}})
    operation: Obj = {
        "operationId": operation_id,
        "parameters": parameters,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
        },
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {t: {"schema": {"type": "object"}} for t in body},
        }
    return operation


def _paths(rt: ResourceType) -> dict[str, Obj]:
    base = "/" + gv_path(rt.group, rt.version)
    scope = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    kind = rt.kind
    paths: dict[str, Obj] = {
        scope: {
            "get": _operation(f"list{kind}", collection=True),
            "post": _operation(f"create{kind}", body=["application/json", "application/yaml"], writes=True),
        },
        f"{scope}/{{name}}": {
            # kubectl explain finds the kind on the read, kubectl's field validation check on the
            # patch (see the module doc).
            "get": {**_operation(f"read{kind}"), "x-kubernetes-group-version-kind": _gvk(rt)},
            "put": _operation(f"replace{kind}", body=["application/json", "application/yaml"], writes=True),
            "patch": {
                **_operation(f"patch{kind}", body=_PATCH_TYPES, writes=True),
                "x-kubernetes-group-version-kind": _gvk(rt),
            },
            "delete": _operation(f"delete{kind}"),
        },
    }
    if "deletecollection" in rt.verbs:
        paths[scope]["delete"] = _operation(f"deleteCollection{kind}", collection=True)
    if rt.namespaced:
        paths[f"{base}/{rt.plural}"] = {"get": _operation(f"list{kind}ForAllNamespaces", collection=True)}
    if rt.has_status:
        paths[f"{scope}/{{name}}/status"] = {
            "get": _operation(f"read{kind}Status"),
            "put": _operation(f"replace{kind}Status", body=["application/json"], writes=True),
            "patch": _operation(f"patch{kind}Status", body=_PATCH_TYPES, writes=True),
        }
    return paths


def openapi_v3_document(registry: Registry, group: str, version: str, title: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Obj] = {}
    schemas: dict[str, Obj] = {}
    for rt in types:
        paths.update(_paths(rt))
        schemas.update(_schemas(rt))
    return {
        "openapi": "3.0.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _schema_name(rt: ResourceType) -> str:
    reversed_group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{reversed_group}.{rt.version}.{rt.kind}"


def _schemas(rt: ResourceType, *, v2: bool = False) -> dict[str, Obj]:
    """The kind's definitions: from its schema (:mod:`~fleet.apiserver.schema`) when it has one,
    else an open schema naming its top-level fields."""
    if rt.schema is None:
        return {_schema_name(rt): _schema(rt)}
    extra: Obj = {"x-kubernetes-group-version-kind": [_gvk(rt)]}
    if "description" not in rt.schema:
        extra["description"] = rt.description or f"{rt.kind} ({rt.api_version})."
    return openapi(_schema_name(rt), rt.schema, extra, v2=v2)


def _schema(rt: ResourceType) -> Obj:
    """An open object schema naming the kind's top-level fields, for ``kubectl explain``.

    The kind is tagged on the schema and the read operation only, never on PATCH, which is where
    kubectl looks for field validation and strategic-merge support (see the module doc).
    """
    text = {"type": "string"}
    properties: dict[str, Obj] = {
        "apiVersion": {
            **text,
            "description": "APIVersion defines the versioned schema of this representation.",
        },
        "kind": {
            **text,
            "description": "Kind is a string value representing the REST resource this object represents.",
        },
        "metadata": {"type": "object", "description": "Standard object's metadata."},
    }
    for field in rt.top_level:
        properties[field] = {"type": "object", "description": f"The {field} of the {rt.kind}."}
    return {
        "type": "object",
        "description": rt.description or f"{rt.kind} ({rt.api_version}).",
        "properties": properties,
        "x-kubernetes-group-version-kind": [_gvk(rt)],
    }


def openapi_v3_index(registry: Registry, title: str) -> Obj:
    """``/openapi/v3``: each group-version with a URL whose ``hash`` changes with its document."""
    paths: dict[str, Obj] = {}
    for group, versions in registry.groups().items():
        for version in versions:
            document = openapi_v3_document(registry, group, version, title)
            digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:32].upper()
            path = gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def openapi_v2_json(title: str, version: str, registry: Registry | None = None) -> Obj:
    """The v2 document in JSON: the kinds' definitions, no paths (see the module docstring)."""
    definitions: dict[str, Obj] = {}
    for rt in registry or ():
        if rt.schema is not None:
            definitions.update(_schemas(rt, v2=True))
    return {
        "swagger": "2.0",
        "info": {"title": title, "version": version},
        "paths": {},
        "definitions": definitions,
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _string_field(number: int, text: str) -> bytes:
    data = text.encode()
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def openapi_v2_protobuf(title: str, version: str) -> bytes:
    """The v2 document as gnostic's ``openapi_v2.Document`` protobuf, which is what kubectl reads.

    Fields: ``swagger`` (1) and ``info`` (2: ``title`` 1, ``version`` 2); no paths or definitions.
    """
    info = _string_field(1, title) + _string_field(2, version)
    return _string_field(1, "2.0") + _varint(2 << 3 | 2) + _varint(len(info)) + info
