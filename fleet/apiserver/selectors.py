"""Label and field selectors in the Kubernetes string syntax, parsed once and matched many times.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``,
comma-separated, all of which must hold. Field selectors: ``path=v``, ``path==v``, ``path!=v``
over the paths a kind supports (``metadata.name``, ``spec.nodeName``...); a missing field reads
as ``""`` as in Kubernetes. Bad syntax is a ``BadRequest`` naming the parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.apiserver.errors import BadRequest
from fleet.label_match import requirement_matches

__all__ = ["FieldSelector", "LabelSelector", "field_value"]

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


#: The string syntax's operators by their ``selection.Operator`` names (:mod:`fleet.label_match`):
#: ``!=`` and ``notin`` match objects without the label, as in Kubernetes.
_OPERATOR = {"=": "In", "in": "In", "!=": "NotIn", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(labels, self.key, _OPERATOR[self.op], self.values)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts]


_SET_EXPR = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ_EXPR = re.compile(r"^(?P<key>[^!=\s]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")


class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    def __init__(self, requirements: Iterable[_Requirement] = ()) -> None:
        self.requirements = tuple(requirements)

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if text is None or not text.strip():
            return cls()
        requirements = [cls._parse_one(part, text) for part in _split_top_level(text)]
        return cls(requirements)

    @staticmethod
    def _parse_one(part: str, whole: str) -> _Requirement:
        def bad(rule: str) -> BadRequest:
            return BadRequest(f"unable to parse requirement: labelSelector {whole!r}: {rule}")

        def key_ok(key: str) -> str:
            if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
                raise bad(f"{key!r} is not a valid label key")
            return key

        def value_ok(value: str) -> str:
            if not _LABEL_VALUE.match(value) or len(value) > 63:
                raise bad(f"{value!r} is not a valid label value")
            return value

        if not part:
            raise bad("empty requirement")
        match = _SET_EXPR.match(part)
        if match:
            values = [v.strip() for v in match.group("values").split(",")]
            if values == [""]:
                raise bad(f"{match.group('op')} needs at least one value")
            return _Requirement(
                key_ok(match.group("key")), match.group("op"), frozenset(value_ok(v) for v in values)
            )
        match = _EQ_EXPR.match(part)
        if match:
            op = "!=" if match.group("op") == "!=" else "="
            return _Requirement(key_ok(match.group("key")), op, frozenset({value_ok(match.group("value"))}))
        if part.startswith("!"):
            return _Requirement(key_ok(part[1:].strip()), "!")
        return _Requirement(key_ok(part), "exists")

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value of a dotted field path; ``""`` when missing, as field selectors read it."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return ""
        node = node[part]
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


class FieldSelector:
    """A parsed field selector restricted to the paths the kind supports."""

    def __init__(self, terms: Iterable[tuple[str, bool, str]] = ()) -> None:
        self.terms = tuple(terms)  # (path, equal, value)

    @classmethod
    def parse(cls, text: str | None, supported: Iterable[str]) -> FieldSelector:
        if text is None or not text.strip():
            return cls()
        allowed = set(supported)
        terms: list[tuple[str, bool, str]] = []
        for part in (p.strip() for p in text.split(",")):
            for op in ("!=", "==", "="):
                if op in part:
                    path, value = (s.strip() for s in part.split(op, 1))
                    break
            else:
                raise BadRequest(f"invalid fieldSelector {text!r}: {part!r} has no operator (=, ==, !=)")
            if path not in allowed:
                raise BadRequest(f'field label not supported: "{path}"')
            terms.append((path, op != "!=", value))
        return cls(terms)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in self.terms)

    def value_of(self, path: str) -> str | None:
        """The value an equality term pins ``path`` to, for index lookups (``metadata.name``)."""
        for term_path, equal, value in self.terms:
            if term_path == path and equal:
                return value
        return None

    def __bool__(self) -> bool:
        return bool(self.terms)
