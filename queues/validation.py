"""ElasticQuotaTree validation: every problem names the node path, the field and the rule broken.

Two passes. The first is the model's own (shape, unknown fields, quantities), whose pydantic errors
are translated from ``spec.root.children.0.max`` locations into node paths (``root/child-2:
max.cpu ...``). The second checks the rules DESIGN.md lists on the parsed tree. The root's ``max``
differing from its ``min`` is only a warning: the seeds demand equality but their own example
(``config/samples/elasticquotatree.yaml``) breaks it, and users copy that example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from queues.quantity import format_quantity
from queues.tree import (
    ANY_NAMESPACE,
    AVAILABLE_ATTRIBUTE,
    HIGHEST_USER_PRIORITY,
    IMPLICIT_ROOT,
    LOWEST_PRIORITY,
    MAX_PRIORITY_ATTRIBUTE,
    PREEMPTION_ATTRIBUTE,
    PREEMPTION_VALUES,
    RECLAIM_ATTRIBUTE,
    RECLAIM_VALUES,
    TREE_NAMESPACE,
    ElasticQuotaTree,
    QuotaNode,
    available_entries,
    parse_max_priority,
    queue_name,
)

__all__ = [
    "Problem",
    "Severity",
    "TreeInvalid",
    "check",
    "is_resource_name",
    "load",
    "load_file",
    "validate",
]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: The node attributes Fleet acts on.
KNOWN_ATTRIBUTES = frozenset(
    {PREEMPTION_ATTRIBUTE, RECLAIM_ATTRIBUTE, AVAILABLE_ATTRIBUTE, MAX_PRIORITY_ATTRIBUTE}
)
#: Attributes koord-queue's own trees carry that Fleet reads no meaning from, and why
#: (``pkg/framework/plugins/elasticquota/elasticquotatree/elasticquota.go`` in
#: koordinator-sh/koord-queue, ``buildElasticQuotaInfo``).
FOREIGN_ATTRIBUTES = {
    "preempt-policy": f"koord-queue's force-preemption switch; Fleet preempts by {PREEMPTION_ATTRIBUTE}",
    "alibabacloud.com/lendlimit": "koord-queue's lend limit; Fleet lends all of an unused min",
}
_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
#: Where a problem that belongs to the document rather than a node is reported.
DOCUMENT = "ElasticQuotaTree"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One finding; ``str()`` is the line a person reads: ``root/child-2: min.cpu 20 exceeds ...``."""

    path: str
    field: str
    message: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class TreeInvalid(ValueError):
    """A tree with at least one error; ``problems`` holds them all (not only the first)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def is_resource_name(name: str) -> bool:
    """A Kubernetes resource name (``cpu``, ``huawei.com/Ascend910``, ``kube-queue/max-jobs``)."""
    return len(name) <= 253 and _RESOURCE.fullmatch(name) is not None


def _dns_label(name: str) -> bool:
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def _dns_subdomain(name: str) -> bool:
    """A quota node's name: ACK and koord-queue trees name nodes ``root.a``, ``root.a.b``."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def _q(resource: str, amount: int) -> str:
    return format_quantity(resource, amount)


def _check_node(path: str, node: QuotaNode, problems: list[Problem]) -> None:
    def error(field: str, message: str) -> None:
        problems.append(Problem(path, field, message))

    if not _dns_subdomain(node.name):
        error(
            "name",
            f"name {node.name!r} must be a DNS-1123 subdomain (lowercase letters, digits, '-', '.')",
        )
    for attribute in sorted(set(node.attributes) - KNOWN_ATTRIBUTES):
        why = FOREIGN_ATTRIBUTES.get(attribute, "not a key Fleet knows")
        problems.append(
            Problem(
                path,
                f"attributes.{attribute}",
                f"attributes.{attribute}: ignored ({why})",
                Severity.WARNING,
            )
        )
    policies = ((PREEMPTION_ATTRIBUTE, PREEMPTION_VALUES), (RECLAIM_ATTRIBUTE, RECLAIM_VALUES))
    for attribute, allowed in policies:
        value = node.attributes.get(attribute)
        if value is not None and value not in allowed:
            error(
                f"attributes.{attribute}",
                f"attributes.{attribute}: {value!r} is not one of {', '.join(allowed)}",
            )
    cap = node.attributes.get(MAX_PRIORITY_ATTRIBUTE)
    if cap is not None and parse_max_priority(cap) is None:
        error(
            f"attributes.{MAX_PRIORITY_ATTRIBUTE}",
            f"attributes.{MAX_PRIORITY_ATTRIBUTE}: {cap!r} is not an integer from {LOWEST_PRIORITY} to "
            f"{HIGHEST_USER_PRIORITY} (the highest priority a user may define; higher ones are the system's)",
        )
    available = node.attributes.get(AVAILABLE_ATTRIBUTE)
    for entry in available_entries(available or ""):
        if entry != ANY_NAMESPACE and not _dns_label(entry):
            error(
                f"attributes.{AVAILABLE_ATTRIBUTE}",
                f"attributes.{AVAILABLE_ATTRIBUTE}: {entry!r} is not a namespace name "
                f"(a comma-separated list of namespaces, or {ANY_NAMESPACE!r})",
            )
    for field, amounts in (("min", node.min), ("max", node.max)):
        for resource, amount in amounts.items():
            if not is_resource_name(resource):
                error(f"{field}.{resource}", f"{field}: {resource!r} is not a valid resource name")
            elif amount < 0:
                error(f"{field}.{resource}", f"{field}.{resource} {_q(resource, amount)} is negative")
    for resource, low in node.min.items():
        high = node.max.get(resource)
        if high is not None and 0 <= high < low:
            error(
                f"min.{resource}",
                f"min.{resource} {_q(resource, low)} exceeds max.{resource} {_q(resource, high)}",
            )
    if node.namespaces and node.children:
        error("namespaces", "namespaces: only a leaf binds namespaces (this node has children)")
    if node.children:
        sums: dict[str, int] = {}
        for child in node.children:
            for resource, amount in child.min.items():
                sums[resource] = sums.get(resource, 0) + amount
        for resource in sorted(sums):
            own = node.min.get(resource, 0)
            if sums[resource] > own:
                error(
                    f"min.{resource}",
                    f"children's min.{resource} sum {_q(resource, sums[resource])} "
                    f"exceeds min.{resource} {_q(resource, own)}",
                )


def validate(tree: ElasticQuotaTree) -> list[Problem]:
    """The DESIGN.md rules over a parsed tree: errors first in tree order, then warnings."""
    problems: list[Problem] = []
    if tree.metadata.namespace != TREE_NAMESPACE:
        problems.append(
            Problem(
                DOCUMENT,
                "metadata.namespace",
                f"metadata.namespace {tree.metadata.namespace!r} must be {TREE_NAMESPACE!r} "
                "(an ElasticQuotaTree elsewhere has no effect)",
            )
        )
    root = tree.spec.root
    if root.name != IMPLICIT_ROOT:
        problems.append(
            Problem(root.name, "name", f"name {root.name!r}: the root must be named {IMPLICIT_ROOT!r}")
        )
    names: dict[str, str] = {}
    queues: dict[str, str] = {}
    bound: dict[str, str] = {}
    for path, _parent, node in tree.walk():
        if node.name in names:
            used_by = names[node.name]
            problems.append(Problem(path, "name", f"name {node.name!r} is already used by {used_by}"))
        else:
            names[node.name] = path
        queue = queue_name(path)
        if queue in queues:
            problems.append(
                Problem(path, "name", f"queue name {queue!r} is also the queue of {queues[queue]}")
            )
        queues.setdefault(queue, path)
        _check_node(path, node, problems)
        for namespace in node.namespaces:
            if not _dns_label(namespace):
                problems.append(
                    Problem(path, "namespaces", f"namespaces: {namespace!r} is not a valid namespace name")
                )
            elif namespace in bound:
                owner = bound[namespace]
                problems.append(
                    Problem(path, "namespaces", f"namespaces: {namespace!r} is already bound by {owner}")
                )
            else:
                bound[namespace] = path
    problems.extend(_unbound_available(tree, bound))
    differs = sorted(r for r in set(root.max) | set(root.min) if root.max.get(r) != root.min.get(r))
    if differs:
        problems.append(
            Problem(
                root.name,
                "max",
                f"max differs from min in {', '.join(differs)}: the root's max should equal its min "
                "(accepted; the root's max is what limits)",
                Severity.WARNING,
            )
        )
    return sorted(problems, key=lambda problem: problem.severity is Severity.WARNING)


def _unbound_available(tree: ElasticQuotaTree, bound: Mapping[str, str]) -> list[Problem]:
    """A warning for each namespace that an available-in attribute lists but no node binds: its
    jobs are refused at submission whatever the attribute says (probably a misspelling)."""
    warnings: list[Problem] = []
    field = f"attributes.{AVAILABLE_ATTRIBUTE}"
    for path, _, node in tree.walk():
        entries = available_entries(node.attributes.get(AVAILABLE_ATTRIBUTE) or "")
        for entry in entries:
            if entry != ANY_NAMESPACE and _dns_label(entry) and entry not in bound:
                warnings.append(
                    Problem(
                        path,
                        field,
                        f"{field}: namespace {entry!r} is bound by no node, so its jobs are refused "
                        "whatever this attribute says",
                        Severity.WARNING,
                    )
                )
    return warnings


def _node_path(document: Any, loc: tuple[int | str, ...]) -> tuple[str, tuple[int | str, ...]]:
    """Split a pydantic location into the node path it points into and the rest (the field)."""
    if loc[:2] != ("spec", "root"):
        return DOCUMENT, loc
    node: Any = document.get("spec", {}).get("root") if isinstance(document, Mapping) else None
    path = _name_of(node, IMPLICIT_ROOT)
    rest = loc[2:]
    while len(rest) >= 2 and rest[0] == "children" and isinstance(rest[1], int):
        children = node.get("children") if isinstance(node, Mapping) else None
        node = children[rest[1]] if isinstance(children, list) and rest[1] < len(children) else None
        path = f"{path}/{_name_of(node, f'children[{rest[1]}]')}"
        rest = rest[2:]
    return path, rest


def _name_of(node: Any, fallback: str) -> str:
    name = node.get("name") if isinstance(node, Mapping) else None
    return name if isinstance(name, str) and name else fallback


def _from_pydantic(document: Any, exc: ValidationError) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        path, rest = _node_path(document, tuple(err["loc"]))
        field = ".".join(str(part) for part in rest)
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = f"{field}: unknown field"
        elif err["type"] != "value_error" and field:
            message = f"{field}: {message[0].lower()}{message[1:]}"
        problems.append(Problem(path, field, message))
    return problems


def _parse(source: Mapping[str, Any] | str | bytes) -> tuple[Any, list[Problem]]:
    if isinstance(source, Mapping):
        return source, []
    try:
        document = yaml.safe_load(source)
    except yaml.YAMLError as exc:
        return None, [Problem(DOCUMENT, "", f"not valid YAML: {exc}".replace("\n", " "))]
    if not isinstance(document, Mapping):
        return None, [Problem(DOCUMENT, "", "the document must be a YAML mapping (an ElasticQuotaTree)")]
    return document, []


def check(source: Mapping[str, Any] | str | bytes) -> tuple[ElasticQuotaTree | None, list[Problem]]:
    """Parse and validate without raising: the tree (None when it did not parse) and all problems."""
    document, problems = _parse(source)
    if problems:
        return None, problems
    try:
        tree = ElasticQuotaTree.model_validate(document)
    except ValidationError as exc:
        return None, _from_pydantic(document, exc)
    return tree, validate(tree)


def load(source: Mapping[str, Any] | str | bytes) -> tuple[ElasticQuotaTree, list[Problem]]:
    """A valid tree and its warnings; raises :class:`TreeInvalid` listing every error."""
    tree, problems = check(source)
    errors = [p for p in problems if p.severity is Severity.ERROR]
    if tree is None or errors:
        raise TreeInvalid(errors)
    return tree, problems


def load_file(path: str | Path) -> tuple[ElasticQuotaTree, list[Problem]]:
    return load(Path(path).read_text(encoding="utf-8"))
