"""Copies whose gang waits to run: since when, why, and what their pods say.

A copy that sits in ``PodGroupPending`` (or whose pods the member's scheduler cannot place)
longer than its policy's toleration is failed over (:mod:`fleet.dispatch.sync.failover`, the
tick). Whether a copy waits is its adapter's ``classify``
(:class:`fleet.workloads.base.WorkloadAdapter`): from the copy's status, and for the kinds whose
operator never says on the job that the gang waits (Kubeflow's: ``reads_pods``) with what its
pods said when last read. Those pods are read from the member's probe thread, one list per
member and round, only while it is Ready.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.shared import Shared, log
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.members import Member, redact
from fleet.workloads import Outcome, WorkloadStatus, is_pod_evidence, unschedulable

__all__ = ["GangWaits"]


class GangWaits:
    """The copies waiting for their gang; tables under ``shared.lock``."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        #: (member, uid, attempt) -> when the copy was first seen waiting for its gang (monotonic).
        self._pending_since: dict[MemberCopy, float] = {}
        #: The same copies -> what says they wait (the member's reason, or their pods').
        self._pending_why: dict[MemberCopy, str] = {}
        #: Copies of kinds whose pods tell that the gang waits, not running yet -> their status
        #: as last seen.
        self._starting: dict[MemberCopy, WorkloadStatus] = {}
        #: Member -> when the pods waiting in it were last read (monotonic).
        self._pods_read: dict[str, float] = {}
        #: What the pods of such a copy said when last read (:func:`fleet.workloads.base.unschedulable`).
        self._evidence: dict[MemberCopy, str] = {}

    def track(self, ident: MemberCopy, seen: WorkloadStatus) -> None:
        """Note whether the copy waits for its gang, by its adapter's classification: from the
        copy's status, and for a kind whose pods tell it (``reads_pods``) with what its pods said
        when last read (:meth:`read_pods`, from the member's probe thread)."""
        adapter = ident.ref.adapter
        reads_pods = is_pod_evidence(adapter) and adapter.reads_pods
        with self.shared.lock:
            if reads_pods:
                seen = replace(seen, unschedulable=self._evidence.get(ident))
            outcome = adapter.classify(seen)
            if outcome is Outcome.STUCK_PENDING:
                self._pending_since.setdefault(ident, time.monotonic())
                self._pending_why[ident] = seen.unschedulable or f"{seen.reason}: {seen.message or ''}"
            else:
                self._pending_since.pop(ident, None)
                self._pending_why.pop(ident, None)
            if reads_pods and outcome in (Outcome.STARTING, Outcome.STUCK_PENDING):
                self._starting[ident] = seen
            else:
                self._starting.pop(ident, None)
                self._evidence.pop(ident, None)

    def read_pods(self, name: str, member: Member) -> None:
        """Read what the pods of ``name``'s copies that wait to run say (for the kinds whose
        operator never says that the gang waits), at most every ``pod_check_every``, and
        classify those copies again with it: a real member's scheduler marks a pod it cannot
        place ``PodScheduled`` False, ``Unschedulable`` (:func:`fleet.workloads.base.unschedulable`).
        One list per member and round, whatever the number of waiting copies: every Pending pod
        that carries a fleet uid, told apart by its uid and attempt labels. Skipped while the
        member is not Ready (its copies are the cluster failover's then)."""
        now = time.monotonic()
        with self.shared.lock:
            if self.shared.not_ready(name):
                return
            waiting = {i: seen for i, seen in self._starting.items() if i.member == name}
            if not waiting or now - self._pods_read.get(name, 0.0) < self.shared.settings.pod_check_every:
                return
            self._pods_read[name] = now
        try:
            pods = member.list_pods(JOB_UID_LABEL, "status.phase=Pending")
        except Exception as exc:  # the member is slow or away: the next round reads again
            log.info("event=pods_not_read member=%s error=%s", name, redact(str(exc)))
            return
        by_copy: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            by_copy.setdefault((str(labels.get(JOB_UID_LABEL)), str(labels.get(ATTEMPT_LABEL))), []).append(
                pod
            )
        for ident, seen in waiting.items():
            evidence = unschedulable(by_copy.get((ident.uid, str(ident.attempt)), []))
            with self.shared.lock:
                if ident not in self._starting:
                    continue  # it ran, finished or went meanwhile
                if evidence is None:
                    self._evidence.pop(ident, None)
                else:
                    self._evidence[ident] = evidence
            self.track(ident, seen)

    def waiting(self) -> list[tuple[MemberCopy, float, str]]:
        """The copies on owned members whose gang waits: (copy, since when, why). Called with
        the lock held."""
        return [
            (i, since, self._pending_why.get(i, ""))
            for i, since in self._pending_since.items()
            if self.shared.mine(i.member)
        ]

    def stop_waiting(self, ident: MemberCopy) -> None:
        """No longer time ``ident``'s wait (its job went or is being evicted)."""
        with self.shared.lock:
            self._pending_since.pop(ident, None)
            self._pending_why.pop(ident, None)

    def forget(self, ident: MemberCopy) -> None:
        """Forget ``ident`` (failed over, or vanished). Called with the lock held."""
        self._pending_since.pop(ident, None)
        self._pending_why.pop(ident, None)
        self._starting.pop(ident, None)
        self._evidence.pop(ident, None)

    def forget_member(self, member: str) -> None:
        """Forget every copy of ``member`` (let go). Called with the lock held."""
        self._pods_read.pop(member, None)
        tables: tuple[dict[MemberCopy, Any], ...] = (
            self._pending_since,
            self._pending_why,
            self._starting,
            self._evidence,
        )
        for table in tables:
            for ident in [i for i in table if i.member == member]:
                del table[ident]
