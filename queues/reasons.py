"""Pending reasons: why a job is still queued, naming the quota node, the resource and the numbers.

The Lua admission check answers with a compact array; :func:`refusal_from_reply` turns it into a
:class:`Refusal`, whose ``str()`` is the reason a user reads in ``kubectl describe``, e.g.
``quota root/child-2: kube-queue/max-jobs 1/1 in use`` or
``quota root: cpu 9 used + 2 requested exceeds max 10`` (amounts in Kubernetes units). A
:class:`Decision` is the ledger's answer for one job: admitted, or refused with its refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from queues.quantity import MAX_JOBS, format_quantity
from queues.tree import queue_name

__all__ = ["Decision", "Refusal", "RefusalKind", "refusal_from_reply"]


class RefusalKind(StrEnum):
    MAX = "max"  #: the node's max (or max-jobs) would be exceeded
    MIN = "min"  #: borrowing beyond min would block a sibling's guarantee
    ORDER = "order"  #: strict policy: the job is not the head of its queue


@dataclass(frozen=True)
class Refusal:
    """One refused admission; ``node`` is a tree path (``root/child-2``)."""

    kind: RefusalKind
    node: str
    resource: str = ""
    used: int = 0
    requested: int = 0
    limit: int = 0
    sibling: str = ""
    sibling_used: int = 0
    sibling_min: int = 0
    sibling_pending: int = 0
    head: str = ""

    def __str__(self) -> str:
        r = self.resource

        def q(amount: int) -> str:
            return format_quantity(r, amount)

        if self.kind is RefusalKind.ORDER:
            return f"queue {queue_name(self.node)}: strict order, waiting behind {self.head}"
        if self.kind is RefusalKind.MAX and r == MAX_JOBS:
            return f"quota {self.node}: {MAX_JOBS} {self.used}/{self.limit} in use"
        if self.kind is RefusalKind.MAX:
            return (
                f"quota {self.node}: {r} {q(self.used)} used + {q(self.requested)} requested "
                f"exceeds max {q(self.limit)}"
            )
        return (
            f"quota {self.node}: {r} {q(self.used)} used + {q(self.requested)} requested exceeds "
            f"min {q(self.limit)} while {self.sibling}, below its min ({q(self.sibling_used)} of "
            f"{q(self.sibling_min)} used), has {self.sibling_pending} pending job"
            + ("s" if self.sibling_pending != 1 else "")
        )


_KINDS = {kind.value: kind for kind in RefusalKind}


def refusal_from_reply(reply: str) -> Refusal:
    """Decode a refusal from ``admit.lua`` (tab-separated, nodes already named by path).

    On the dispatcher's hot path (most decisions are refusals): one split, one construction.
    """
    kind_text, _, rest = reply.partition("\t")
    kind = _KINDS[kind_text]
    if kind is RefusalKind.ORDER:
        node, _, head = rest.partition("\t")  # the head's id is last: it may hold anything
        return Refusal(kind, node, head=head)
    f = rest.split("\t")
    if kind is RefusalKind.MAX:
        return Refusal(kind, f[0], f[1], int(f[2]), int(f[3]), int(f[4]))
    return Refusal(kind, f[0], f[1], int(f[2]), int(f[3]), int(f[4]), f[5], int(f[6]), int(f[7]), int(f[8]))


@dataclass(frozen=True)
class Decision:
    """The answer to "may this job start now": admitted, or refused with the exact reason."""

    job: str
    admitted: bool
    leaf: str = ""
    refusal: Refusal | None = None
    #: True when the job had been admitted before this call (admission is idempotent).
    already: bool = False
    #: Why no decision could be made (the job was neither pending nor admitted: it was released).
    error: str = ""

    @property
    def reason(self) -> str | None:
        if self.refusal is not None:
            return str(self.refusal)
        return self.error or None
