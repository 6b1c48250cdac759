"""The schema of each kind the fleet serves: one YAML file per kind, the one place to write it.

Each file is the JSON Schema of a kind's own fields (:mod:`fleet.apiserver.schema` says which
subset, and how it both validates and becomes the kind's OpenAPI for ``kubectl explain``).
To give a new kind a schema, add ``<kind in lower case>.yaml`` here and attach it where the kind
is registered with :func:`with_schema`. Field descriptions say what Fleet does with a field;
where the field is another project's (MindCluster, Karmada, Kube Queue, Kubernetes), its
meaning is that project's, named in the file's first description.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from importlib import resources
from typing import Any

import yaml

from fleet.apiserver.resources import ResourceType

__all__ = ["load", "with_schema"]


@functools.cache
def load(kind: str) -> dict[str, Any]:
    """The schema of ``kind`` (``AscendJob`` reads ``ascendjob.yaml``)."""
    text = resources.files(__package__).joinpath(f"{kind.lower()}.yaml").read_text(encoding="utf-8")
    schema = yaml.safe_load(text)
    if not isinstance(schema, dict):
        raise ValueError(f"the schema of {kind} is not a mapping")
    return schema


def with_schema(rt: ResourceType) -> ResourceType:
    """``rt`` with the schema of its kind attached, when this package has one for it (a kind
    without one is served with its adapter's validation alone, and explained only at the top)."""
    if not resources.files(__package__).joinpath(f"{rt.kind.lower()}.yaml").is_file():
        return rt
    return replace(rt, schema=load(rt.kind))
