"""Label requirements as Kubernetes matches them: one rule for every selector Fleet reads.

A requirement is a key, an operator and values, with the meaning of
``k8s.io/apimachinery/pkg/labels.Requirement.Matches``:

* ``In``: the label is present and its value is one of the values;
* ``NotIn``: the label is absent, or its value is none of the values;
* ``Exists`` / ``DoesNotExist``: the label is present / absent, whatever its value;
* ``Gt`` / ``Lt``: the label is present, both it and the single value parse as integers, and it
  is greater / less (``NodeSelectorRequirement`` only).

Selectors in the string syntax of list calls (:mod:`fleet.apiserver.selectors`), Karmada's
structured label and field selectors (:mod:`fleet.policy`) and nodeSelector terms and affinity
(:mod:`fleet.placement.node_constraints`) all match through :func:`requirement_matches`. The member
simulator's own scheduler keeps its own rule on purpose: it is the independent judge of Fleet's
placements (:mod:`fleet.sim`).

A base module like :mod:`fleet.fastjson`: it imports nothing of Fleet, and every layer may
import it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

__all__ = ["OPERATORS", "requirement_matches"]

#: The operators of ``NodeSelectorRequirement``; label selectors use the first four.
OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def requirement_matches(labels: Mapping[str, str], key: str, operator: str, values: Collection[str]) -> bool:
    """Whether ``labels`` satisfy the requirement ``key operator values``; an unknown operator
    matches nothing (callers validate operators where they parse them)."""
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, want = int(value), int(next(iter(values)))
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False
