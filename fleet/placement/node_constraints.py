"""What a pod asks of a node besides resources: node selector, required node affinity, tolerations.

These follow the Kubernetes scheduler's filter plugins (NodeAffinity, TaintToleration) so that
Fleet's answer for a node is the member scheduler's answer. Everything here is immutable and
hashable: identical pod templates of different jobs produce equal constraints, which is what lets
the fit cache results per demand instead of per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.label_match import OPERATORS, requirement_matches

__all__ = [
    "BLOCKING_EFFECTS",
    "NodeAffinity",
    "NodeSelectorRequirement",
    "SelectorError",
    "Taint",
    "Toleration",
    "parse_node_affinity",
    "parse_taints",
    "parse_tolerations",
    "tolerates_all",
]

#: Taint effects that keep a pod off a node (``PreferNoSchedule`` only lowers its score).
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class SelectorError(ValueError):
    """A malformed selector, toleration or taint; the message names the field."""


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str  # Equal or Exists
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key in ("", taint.key)
        return self.key == taint.key and self.value == taint.value


def tolerates_all(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> bool:
    """Whether every blocking taint is tolerated (the TaintToleration filter)."""
    return all(
        any(t.tolerates(taint) for t in tolerations) for taint in taints if taint.effect in BLOCKING_EFFECTS
    )


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(labels, self.key, self.operator, self.values)

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True)
class NodeAffinity:
    """Required node affinity: the node must match ONE term, a term matches when ALL its parts do.

    ``matchFields`` only supports ``metadata.name`` in Kubernetes; it is kept as a requirement on
    the pseudo label :data:`NODE_NAME_FIELD` that :meth:`matches` fills in.
    """

    terms: tuple[tuple[NodeSelectorRequirement, ...], ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        view = {**labels, NODE_NAME_FIELD: node_name}
        return any(all(r.matches(view) for r in term) for term in self.terms)

    def keys(self) -> frozenset[str]:
        return frozenset(r.key for term in self.terms for r in term)

    def __str__(self) -> str:
        return " or ".join("(" + ", ".join(str(r) for r in term) + ")" for term in self.terms)


NODE_NAME_FIELD = "metadata.name"


def _requirement(raw: Any, path: str) -> NodeSelectorRequirement:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{path}: must be an object")
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise SelectorError(f"{path}.key: must be a non-empty string")
    if op not in OPERATORS:
        raise SelectorError(f"{path}.operator: must be one of {', '.join(sorted(OPERATORS))}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{path}.values: must be a list of strings")
    if op in ("In", "NotIn") and not values:
        raise SelectorError(f"{path}.values: must not be empty for {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{path}.values: must be empty for {op}")
    if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise SelectorError(f"{path}.values: must be one integer for {op}")
    return NodeSelectorRequirement(key, str(op), tuple(values))


def parse_node_affinity(affinity: Any, path: str) -> NodeAffinity | None:
    """The required part of ``spec.affinity.nodeAffinity``; ``None`` when there is none."""
    if not isinstance(affinity, Mapping):
        return None
    node = affinity.get("nodeAffinity")
    if not isinstance(node, Mapping):
        return None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    rpath = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    raw_terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(raw_terms, list) or not raw_terms:
        raise SelectorError(f"{rpath}.nodeSelectorTerms: must be a non-empty list")
    terms: list[tuple[NodeSelectorRequirement, ...]] = []
    for i, term in enumerate(raw_terms):
        tpath = f"{rpath}.nodeSelectorTerms[{i}]"
        if not isinstance(term, Mapping):
            raise SelectorError(f"{tpath}: must be an object")
        reqs = [
            _requirement(r, f"{tpath}.matchExpressions[{j}]")
            for j, r in enumerate(term.get("matchExpressions") or [])
        ]
        for j, r in enumerate(term.get("matchFields") or []):
            field = _requirement(r, f"{tpath}.matchFields[{j}]")
            if field.key != NODE_NAME_FIELD:
                raise SelectorError(f"{tpath}.matchFields[{j}].key: only {NODE_NAME_FIELD} is supported")
            reqs.append(field)
        terms.append(tuple(reqs))
    return NodeAffinity(tuple(terms))


def parse_tolerations(raw: Any, path: str) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SelectorError(f"{path}: must be a list")
    out: list[Toleration] = []
    for i, item in enumerate(raw):
        ipath = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise SelectorError(f"{ipath}: must be an object")
        op = item.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise SelectorError(f"{ipath}.operator: must be Equal or Exists")
        key, value, effect = (
            str(item.get("key") or ""),
            str(item.get("value") or ""),
            item.get("effect") or "",
        )
        if op == "Exists" and value:
            raise SelectorError(f"{ipath}.value: must be empty when operator is Exists")
        if op == "Equal" and not key:
            raise SelectorError(f"{ipath}.key: must be set when operator is Equal")
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise SelectorError(f"{ipath}.effect: must be NoSchedule, PreferNoSchedule or NoExecute")
        out.append(Toleration(key, str(op), value, str(effect)))
    return tuple(out)


def parse_taints(raw: Any) -> tuple[Taint, ...]:
    """A node's ``spec.taints`` (as the API server stored them, so not re-validated)."""
    out = [
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in raw or []
        if isinstance(t, Mapping)
    ]
    return tuple(sorted(out, key=lambda t: (t.key, t.value, t.effect)))
