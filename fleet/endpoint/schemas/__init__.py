"""The schema of each kind the fleet serves: one YAML file per kind, the one place to write it.

Each file is the JSON Schema of a kind's own fields (:mod:`fleet.apiserver.schema` says which
subset, and how it both validates and becomes the kind's OpenAPI for ``kubectl explain``).
To give a new kind a schema, add ``<kind in lower case>.yaml`` here and attach it where the kind
is registered with :func:`with_schema`. Two groups may serve a kind of the same name with
different fields (Kubeflow's and T9k's MPIJob): then each file is named
``<kind>.<group>.yaml``, which is looked up first. Field descriptions say what Fleet does with
a field; where the field is another project's (MindCluster, Kubeflow, T9k, Karmada, Kube Queue,
Kubernetes), its meaning is that project's, named in the file's first comment. Parts several
kinds share (Kubeflow's RunPolicy and ReplicaSpec) live in a file named ``_<name>.yaml``, whose
``$defs`` a schema takes in with ``include: [_<name>.yaml]``, so they too are written once; a
kind with exactly another's fields (ClusterPropagationPolicy) says ``extends: <file>`` and gives
its own description.

Where a kind embeds a type of Kubernetes itself (a pod template's ``spec``, a Service's ``spec``,
an autoscaling metric), the node says ``kubernetes: <client model>`` (``kubernetes: V1PodSpec``)
instead of restating it: the node becomes that type with every field and type Kubernetes gives it
(:mod:`fleet.apiserver.kubetypes`, from the official client's models), its nested types added to
``$defs``; ``description`` and ``properties`` written beside it say what Fleet does with those
fields, in Fleet's words, and may name only fields the type has. The schema is the kind's whole
list of fields: what it does not declare is an unknown field (:mod:`fleet.apiserver.fields`).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from fleet.apiserver import ResourceType, is_kube_model, kube_definitions

__all__ = ["load", "with_schema"]


def _file(kind: str, group: str) -> Traversable | None:
    """The schema file of ``kind`` in ``group``: ``<kind>.<group>.yaml``, else ``<kind>.yaml``."""
    here = resources.files(__package__)
    names = [f"{kind.lower()}.{group}.yaml"] if group else []
    for name in [*names, f"{kind.lower()}.yaml"]:
        if here.joinpath(name).is_file():
            return here.joinpath(name)
    return None


@functools.cache
def load(kind: str, group: str = "") -> dict[str, Any]:
    """The schema of ``kind`` in ``group`` (``AscendJob`` reads ``ascendjob.yaml``; Kubeflow's
    ``MPIJob`` reads ``mpijob.kubeflow.org.yaml``)."""
    found = _file(kind, group)
    if found is None:
        raise FileNotFoundError(f"no schema for {kind} in group {group!r}")
    schema = yaml.safe_load(found.read_text(encoding="utf-8"))
    if not isinstance(schema, dict):
        raise ValueError(f"the schema of {kind} is not a mapping")
    if "extends" in schema:  # a kind with another's fields, in its own words
        base = yaml.safe_load(
            resources.files(__package__).joinpath(schema.pop("extends")).read_text(encoding="utf-8")
        )
        schema = {**base, **schema}
    for name in schema.pop("include", []):
        shared = yaml.safe_load(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
        schema["$defs"] = {**shared["$defs"], **schema.get("$defs", {})}
    defs: dict[str, Any] = {}
    expanded: dict[str, Any] = _expand(schema, defs, kind)
    schema = expanded
    if defs:
        schema["$defs"] = {**defs, **schema.get("$defs", {})}
    return schema


def _expand(node: Any, defs: dict[str, Any], where: str) -> Any:
    """``node`` with every ``kubernetes: <model>`` node made that Kubernetes type (see the module
    doc); the types it reaches are added to ``defs``."""
    if isinstance(node, list):
        return [_expand(item, defs, where) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _expand(value, defs, f"{where}.{key}") for key, value in node.items()}
    model = out.pop("kubernetes", None)
    if model is None:
        return out
    if not isinstance(model, str) or not is_kube_model(model):
        raise ValueError(f"{where}: kubernetes: {model!r} is not a model of the kubernetes client")
    inline, reached = kube_definitions(model)
    defs.update(reached)
    properties = inline.get("properties", {})
    for field, said in (out.pop("properties", None) or {}).items():
        if field not in properties:
            raise ValueError(f"{where}: {model} has no field {field!r}")
        properties[field] = {**properties[field], **said}
    return {**inline, **out}


def with_schema(rt: ResourceType) -> ResourceType:
    """``rt`` with the schema of its kind attached, when this package has one for it (a kind
    without one is served with its adapter's validation alone, and explained only at the top)."""
    if _file(rt.kind, rt.group) is None:
        return rt
    return replace(rt, schema=load(rt.kind, rt.group))
