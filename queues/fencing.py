"""Fencing: the guard a lease holder's writes carry (:class:`Fence`) and the error of a write it
refused (:class:`Fenced`), one type each for the quota ledger and the fleet's object store.

A lease holder (the dispatcher's leader lease, ``fleet.dispatch.lease``) passes the lease key and
the token it holds with a write; the script that writes checks, in the same run, that the key
still holds that token and changes nothing otherwise (Kleppmann's fencing tokens, *Designing
Data-Intensive Applications*, ch. 8). The key must share the hash slot of the keys written.
:class:`queues.Ledger` and ``fleet.state.Objects`` both take this :class:`Fence` and both raise
this :class:`Fenced`, so a writer that lost its lease catches one type.

:class:`Fenced` is a :class:`~queues.records.LedgerError`, as the ledger's has always been: a
caller that catches the ledger's errors catches a fenced ledger write with them. Fleet relies on
no more than that: the dispatcher catches :class:`Fenced` itself (it forfeits the lease), and
the handlers of ``LedgerError`` it has (the reconcile's, around queueing a job) wrap no fenced
write, of the ledger or of the object store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from queues.records import LedgerError

if TYPE_CHECKING:
    from queues.reasons import Decision

__all__ = ["Fence", "Fenced"]


class Fence(NamedTuple):
    """A write guard: ``key`` (a lease key in the written keys' hash slot) must hold ``token``."""

    key: str
    token: str


class Fenced(LedgerError):
    """A fenced write whose token is no longer the one its lease key holds: the writer lost its
    lease (another holder took over, or it expired), so the script changed nothing.

    ``decisions`` holds what :meth:`queues.Ledger.admit_pending_many` decided, and wrote, in the
    script runs before the fence turned (each run checks the fence); empty everywhere else.
    """

    def __init__(self, message: str, decisions: Sequence[Decision] = ()) -> None:
        super().__init__(message)
        self.decisions: list[Decision] = list(decisions)
