"""Kubernetes quantities as exact integers: the one home of quantity parsing in Fleet.

Everything that holds an amount of a resource (the quota ledger, job demand, node capacity)
stores it as an ``int`` in a canonical unit, never as a float, so that sums and comparisons in
Python and in Redis Lua agree to the unit:

* ``cpu`` is counted in millicores (``"500m"`` -> 500, ``2`` -> 2000);
* every other resource (memory, ``huawei.com/Ascend910``, ``kube-queue/max-jobs``, ...) is
  counted in its base unit (bytes for memory), rounded up like the API server rounds requests.

Parsing is delegated to the official ``kubernetes`` client's ``parse_quantity``; this module only
fixes the units and the rounding, and holds strings to the grammar ``resource.ParseQuantity``
accepts (``k8s.io/apimachinery/pkg/api/resource/quantity.go``; the same pattern the CRDs that
embed quantities carry), which the client's parser is looser than (it takes ``" 2"`` and
``"1_000"``). :func:`parse_exact` gives the amount as written, for rules about its form (an
extended resource must be a whole number). Redis Lua numbers are doubles, so amounts above 2**53 lose
exactness there: :data:`UNLIMITED` caps them, and a limit at or above it means "not limited".
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from decimal import Decimal

__all__ = [
    "MAX_JOBS",
    "MAX_JOBS_ALIASES",
    "MAX_JOBS_UNLIMITED",
    "MILLI_RESOURCES",
    "UNLIMITED",
    "QuantityError",
    "format_quantity",
    "parse",
    "parse_exact",
]

#: The ElasticQuotaTree key that counts admitted, unfinished jobs.
MAX_JOBS = "kube-queue/max-jobs"
#: Other spellings of :data:`MAX_JOBS`: koord-queue (kube-queue's successor, which ACK's
#: ack-kube-queue ships) writes ``koord-queue/max-jobs`` since its v0.2.0 and still reads
#: ``kube-queue/max-jobs`` (``pkg/framework/plugins/elasticquota`` in koordinator-sh/koord-queue).
#: Fleet reads both as the one job count and shows it as :data:`MAX_JOBS`.
MAX_JOBS_ALIASES = frozenset({"koord-queue/max-jobs"})
#: Kube Queue's convention: a max-jobs at or above 2**31-1 means unlimited.
MAX_JOBS_UNLIMITED = 2**31 - 1
#: Largest integer a Redis Lua number holds exactly; larger limits mean "unlimited".
UNLIMITED = 2**53
#: Resources counted in thousandths of their unit.
MILLI_RESOURCES = frozenset({"cpu"})

#: ``<signedNumber><suffix>`` of ``resource.ParseQuantity``: binary SI (Ki..Ei), decimal SI
#: (n, u, m, "", k, M, G, T, P, E) or a decimal exponent.
_GRAMMAR = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?"
)


_PARSE: list[Callable[[object], Decimal]] = []


def _parser() -> Callable[[object], Decimal]:
    """The client's ``parse_quantity``, imported on first use: importing the ``kubernetes``
    package takes a third of a second, which a command that parses no quantity should not pay."""
    if not _PARSE:
        from kubernetes.utils.quantity import parse_quantity

        _PARSE.append(parse_quantity)
    return _PARSE[0]


class QuantityError(ValueError):
    """A value that is not a valid Kubernetes quantity (or is negative where that is wrong)."""


def parse_exact(value: object) -> Decimal:
    """The amount ``value`` (``"1500m"``, ``2``, ``"10Gi"``) stands for, exactly, in its base unit."""
    if isinstance(value, str):
        return _parse_text(value)
    return _parse_exact(value)


def _parse_exact(value: object) -> Decimal:
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not _GRAMMAR.fullmatch(value)):
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        amount: Decimal = _parser()(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise QuantityError(f"{value!r} is not a quantity") from exc
    if not amount.is_finite():
        raise QuantityError(f"{value!r} is not a quantity")
    return amount


#: The quantities Fleet reads are a few strings written again and again (every node of a kind
#: says ``"1536Gi"``, every pod of a job ``"8"``): the 10,000 nodes of 100 members were 8 parses a
#: node at 12 us each on the dispatcher's start (issue 30, goal 6). A ``Decimal`` is immutable, so
#: the amount of a string is kept; a string that is not a quantity raises each time (not kept).
_parse_text: Callable[[str], Decimal] = functools.lru_cache(maxsize=4096)(_parse_exact)


def parse(resource: str, value: object) -> int:
    """Parse ``value`` (``"10Gi"``, ``500``, ``"500m"``) into the canonical integer for ``resource``."""
    if isinstance(value, str):
        return _canonical_text(resource, value)
    return _canonical(resource, value)


def _canonical(resource: str, value: object) -> int:
    amount = parse_exact(value)
    if resource in MILLI_RESOURCES:
        amount *= 1000
    # Round away from zero so that a tiny negative amount stays detectably negative.
    return math.ceil(amount) if amount >= 0 else -math.ceil(-amount)


#: :func:`parse` of a string, kept as :data:`_parse_text` is (resource names are few too).
_canonical_text: Callable[[str, str], int] = functools.lru_cache(maxsize=4096)(_canonical)


def format_quantity(resource: str, amount: int) -> str:
    """Render a canonical amount the way a person reads it (``2500m``, ``10Gi``, ``8``)."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == "memory" or resource.endswith("storage"):
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
