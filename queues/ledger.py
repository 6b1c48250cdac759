"""The Redis quota ledger: apply a tree, admit, release, requeue, rebuild. See :mod:`queues`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import redis
from redis.commands.core import Script
from redis.crc import key_slot

from queues.fencing import Fence, Fenced
from queues.heads import ClassHeads, RunningJob, parse_heads
from queues.keys import DEFAULT_KEYS, Keys
from queues.pending import PendingQueues, QueuePolicy
from queues.quantity import format_quantity
from queues.reasons import Decision, refusal_from_reply
from queues.records import (
    SEQ_WIDTH,
    InvalidRequest,
    JobRecord,
    JobState,
    LedgerError,
    check_job,
    decode_record,
    request_args,
    score_of,
    text,
)
from queues.scripts import LAYOUT, scripts_for
from queues.snapshot import Snapshot
from queues.tree import IMPLICIT_ROOT, ElasticQuotaTree, is_unlimited
from queues.validation import Problem, Severity, TreeInvalid, validate

__all__ = ["Applied", "ApplyRefused", "Decision", "Drift", "Ledger", "VersionConflict", "leaf_in"]


class ApplyRefused(LedgerError):
    """The tree was not applied (it would lose jobs or break a limit); nothing changed."""


class VersionConflict(ApplyRefused):
    """Someone applied another tree since the version the caller based its change on."""


@dataclass(frozen=True)
class Applied:
    version: int
    changed: bool
    warnings: list[Problem] = field(default_factory=list)
    #: Each ``max`` the tree set below what is in use (applied: new jobs wait under it).
    lowered: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Drift:
    """A counter that disagrees with the job records.

    ``field`` is the node-hash field (``used:cpu``, ``pending``, ``due:cpu``) or
    ``queue`` (the node's queue length against its pending records).
    """

    node: str
    field: str
    stored: int
    expected: int

    def __str__(self) -> str:
        return f"{self.node}: {self.field} counter {self.stored}, job records say {self.expected}"


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unescaped(reply: str) -> str:
    r"""Undo ``escaped`` of ``admit.lua``: in job ids in a reply, ``\\`` and ``\n`` stand for a
    backslash and a newline, so that decisions can be joined by newlines."""
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), reply)


def _is_fenced(reply: object) -> bool:
    """Whether an admit reply is the fence's ``-2`` (a bulk string, not a list of decisions)."""
    return isinstance(reply, bytes | str) and text(reply) == "-2"


class _CompiledNode(TypedDict):
    """One node as the apply script stores it (``queues/lua/apply.lua`` reads these fields)."""

    name: str
    path: str
    #: ``""`` at the root.
    parent: str
    #: The node, then its ancestors up to the root.
    chain: list[str]
    #: Its children with a ``min``.
    guarded: list[str]
    #: The resources its ``min`` names.
    mins: list[str]
    #: ``max:<resource>`` and ``min:<resource>`` -> amount (canonical units).
    limits: dict[str, str]


def _compile(tree: ElasticQuotaTree) -> list[_CompiledNode]:
    """The tree as the Lua scripts store it: one entry per node with its chain to the root."""
    parents: dict[str, str | None] = {}
    out: list[_CompiledNode] = []
    for path, parent_path, node in tree.walk():
        parent = parent_path.rsplit("/", 1)[-1] if parent_path else None
        parents[node.name] = parent
        chain = [node.name]
        while (up := parents[chain[-1]]) is not None:
            chain.append(up)
        limits = {f"max:{r}": str(a) for r, a in node.max.items() if not is_unlimited(r, a)}
        limits.update({f"min:{r}": str(a) for r, a in node.min.items() if a > 0})
        guarded = [c.name for c in node.children if any(a > 0 for a in c.min.values())]
        mins = sorted(r for r, a in node.min.items() if a > 0)
        out.append(
            {
                "name": node.name,
                "path": path,
                "parent": parent or "",
                "chain": chain,
                "guarded": guarded,
                "mins": mins,
                "limits": limits,
            }
        )
    return out


def leaf_in(tree: ElasticQuotaTree | None, namespace: str, labels: Mapping[str, str] | None = None) -> str:
    """The node a job of ``namespace`` with ``labels`` is queued and charged on, in ``tree`` (the
    applied tree, as the caller read it; None: none applied, and every job goes to the implicit
    root). Raises :class:`queues.tree.UnboundJob` naming the namespace (or label) when the tree
    has no node for it."""
    return IMPLICIT_ROOT if tree is None else tree.leaf_for(namespace, labels)


class Ledger:
    """Quota usage in Redis, changed only by atomic Lua scripts over a leaf and its ancestors.

    One instance per Redis client; it is cheap and holds no state but a parsed copy of the
    applied tree (refreshed when its version changes).
    """

    def __init__(self, client: redis.Redis, keys: Keys = DEFAULT_KEYS) -> None:
        self.client = client
        self.keys = keys
        self.pending = PendingQueues(client, keys)
        self._scripts = scripts_for(client, keys)
        self._tree: tuple[int, ElasticQuotaTree] | None = None
        self._names: list[str] | None = None
        self._names_version = -1

    # -- the tree ---------------------------------------------------------------------------

    def version(self) -> int:
        """The applied tree's version; 0 while none is applied."""
        return int(self.client.hget(self.keys.meta, "version") or 0)

    def tree(self) -> ElasticQuotaTree | None:
        """The applied tree, or None (then admission is unlimited under the implicit root)."""
        return self.tree_at(self.version())

    def tree_at(self, version: int) -> ElasticQuotaTree | None:
        """:meth:`tree` for a caller that read the version itself (``HGET meta version``, what
        :meth:`version` reads) in one round trip with reads of its own: the applied tree, its spec
        read (one more round trip) only when ``version`` is not the one this ledger last parsed."""
        if version == 0:
            return None
        if self._tree is None or self._tree[0] != version:
            raw = self.client.hget(self.keys.meta, "spec")
            if raw is None:
                return None
            self._tree = (version, ElasticQuotaTree.model_validate(json.loads(text(raw))))
        return self._tree[1]

    def apply(self, tree: ElasticQuotaTree, *, expected_version: int | None = None) -> Applied:
        """Make ``tree`` the quota tree, keeping usage (recomputed from the admitted jobs).

        Refused with :class:`ApplyRefused` (nothing changes) when a node that would disappear
        still holds admitted or pending jobs; with :class:`VersionConflict` when
        ``expected_version`` is given and is not current. Re-applying the same tree is a no-op
        that keeps the version.

        A ``max`` (``kube-queue/max-jobs`` included) below what is already in use is applied, as
        Kubernetes' ResourceQuota accepts a hard limit below its use: the admitted jobs keep
        running, and admission refuses new ones under that node until use falls below the new
        ``max``. Each such limit is in the result's ``lowered``, a warning naming the node, the
        field and the figures.
        """
        problems = validate(tree)
        errors = [p for p in problems if p.severity is Severity.ERROR]
        if errors:
            raise TreeInvalid(errors)
        warnings = [p for p in problems if p.severity is Severity.WARNING]
        spec = json.dumps(tree.to_document(), sort_keys=True, separators=(",", ":"))
        nodes = _compile(tree)
        named = sorted({field.split(":", 1)[1] for node in nodes for field in node["limits"]})
        governed = "\t" + "".join(f"{r}\t" for r in named)
        expected = "" if expected_version is None else str(expected_version)
        args = [expected, spec, json.dumps(nodes), governed]
        reply = self._scripts.apply(keys=[self.keys.meta], args=args)
        status = int(reply[0])
        if status in (1, 2):
            over = [text(value) for value in reply[2:]]
            lowered: list[Problem] = []
            for at in range(0, len(over), 4):
                name, resource, used, limit = over[at : at + 4]
                path = tree.paths().get(name, name)
                lowered.append(
                    Problem(
                        path,
                        f"max.{resource}",
                        f"max.{resource} {format_quantity(resource, int(limit))} is below the "
                        f"{format_quantity(resource, int(used))} in use: the admitted jobs keep running, "
                        "new ones wait until use falls below it",
                        Severity.WARNING,
                    )
                )
            return Applied(int(reply[1]), status == 1, warnings, lowered)
        kind = text(reply[1])
        if kind == "version":
            raise VersionConflict(f"the applied tree is version {text(reply[2])}, not {expected_version}")
        if kind in ("admitted", "pending"):
            old = self.tree()
            name = text(reply[2])
            where = old.paths().get(name, name) if old is not None else name
            raise ApplyRefused(
                f"{where}: still has {kind} job {text(reply[3])}; a node with {kind} jobs cannot be removed"
            )
        raise LedgerError(f"the quota ledger's apply script answered {kind!r}")

    # -- jobs -------------------------------------------------------------------------------

    def enqueue(
        self,
        job: str,
        leaf: str,
        request: Mapping[str, int],
        priority: int = 0,
        *,
        pipeline: redis.client.Pipeline | None = None,
    ) -> JobState | None:
        """Queue a job; see :meth:`queues.pending.PendingQueues.enqueue`."""
        return self.pending.enqueue(job, leaf, request, priority, pipeline=pipeline)

    def admit(
        self,
        job: str,
        leaf: str,
        request: Mapping[str, int],
        priority: int = 0,
        *,
        fence: Fence | None = None,
    ) -> Decision:
        """Admit a job that was never queued, charging ``leaf`` and its ancestors, or refuse it.

        With ``fence`` (lease key, token) it changes nothing and raises :class:`Fenced` unless
        the key still holds the token.
        """
        check_job(job)
        args = [*self._fence_args(fence), "direct", job, leaf, score_of(priority), *request_args(request)]
        reply = self._scripts.admit(keys=[self.keys.meta], args=args)
        if _is_fenced(reply):
            raise self._fenced(fence)
        return self._decision(job, reply)

    def admit_pending(
        self, job: str, policy: QueuePolicy = QueuePolicy.BEST_EFFORT, *, fence: Fence | None = None
    ) -> Decision:
        """One atomic decision: take ``job`` from its queue and admit it, or leave it and say why.

        Under :attr:`QueuePolicy.STRICT` only the head of its queue may be admitted. Raises
        :class:`LedgerError` when the job is neither pending nor admitted, and :class:`Fenced`
        (nothing changed) when ``fence`` is given and its key no longer holds its token.
        """
        decision = self.admit_pending_many([job], policy, fence=fence)[0]
        if decision.error:
            raise LedgerError(decision.error)
        return decision

    def admit_pending_many(
        self,
        jobs: Sequence[str],
        policy: QueuePolicy = QueuePolicy.BEST_EFFORT,
        *,
        batch: int = 64,
        fence: Fence | None = None,
    ) -> list[Decision]:
        """:meth:`admit_pending` for several jobs, decided one after the other, in order.

        ``batch`` jobs go to one script run (and several runs to one pipeline): each decision is
        exactly the one a script of its own would make at that point, batching only saves round
        trips and per-script overhead; it holds Redis for ``batch`` decisions at a time. A job
        released meanwhile gets a decision with ``error`` set rather than an exception, so the
        others' are kept.

        With ``fence`` (lease key, token; the key in this ledger's hash slot) every script run
        first checks that the key still holds the token; a run that finds it does not changes
        nothing and :class:`Fenced` is raised, carrying the decisions of the runs before it.
        """
        if batch < 1:
            raise InvalidRequest(f"batch: {batch} must be at least 1")
        strict = "1" if policy is QueuePolicy.STRICT else "0"
        for job in jobs:
            check_job(job)
        if not jobs:
            return []
        head = [*self._fence_args(fence), "pending", strict]
        chunks = [jobs[start : start + batch] for start in range(0, len(jobs), batch)]
        if len(chunks) == 1:  # one round trip: no pipeline, whose SCRIPT EXISTS would be another
            replies = [self._scripts.admit(keys=[self.keys.meta], args=[*head, *chunks[0]])]
        else:
            pipe = self.client.pipeline(transaction=False)
            for chunk in chunks:
                self._scripts.admit(keys=[self.keys.meta], args=[*head, *chunk], client=pipe)
            replies = pipe.execute()
        decisions: list[Decision] = []
        for chunk, reply in zip(chunks, replies, strict=True):
            if _is_fenced(reply):
                raise self._fenced(fence, decisions)
            lines = text(reply).split("\n")
            decisions += [
                self._decision(job, line, lenient=True) for job, line in zip(chunk, lines, strict=True)
            ]
        return decisions

    def _decision(self, job: str, reply: bytes | str, *, lenient: bool = False) -> Decision:
        status, _, rest = text(reply).partition("\t")
        if "\\" in rest:
            rest = _unescaped(rest)
        if status == "0":
            return Decision(job, False, "", refusal_from_reply(rest))
        if status == "-1":
            if lenient:
                return Decision(job, False, error=rest)
            raise LedgerError(rest)
        return Decision(job, True, rest, None, status == "2")

    def release(
        self, job: str, *, pipeline: redis.client.Pipeline | None = None, fence: Fence | None = None
    ) -> JobState | None:
        """Forget a finished or deleted job: return its usage, or take it out of its queue.

        Idempotent; returns the state the job was in (None when queued into ``pipeline``: the
        script's reply is then the pipeline's, ``[-2, "fenced"]`` when ``fence`` stopped it).
        With ``fence`` it changes nothing and raises :class:`Fenced` unless the lease key still
        holds the token.
        """
        check_job(job)
        args = [*self._fence_args(fence), job]
        if pipeline is not None:
            self._scripts.release(keys=[self.keys.meta], args=args, client=pipeline)
            return None
        reply = self._scripts.release(keys=[self.keys.meta], args=args)
        if int(reply[0]) == -2:
            raise self._fenced(fence)
        return self.release_reply(reply)

    def release_call(self, job: str) -> tuple[Script, list[str], list[str]]:
        """:meth:`release` of ``job`` as a (script, keys, args) run for a caller to send in one
        pipeline with others (``fleet.connections.run_scripts``); its reply reads as
        :meth:`release_reply` says. Unfenced: the roles that finish jobs hold no lease."""
        check_job(job)
        return self._scripts.release, [self.keys.meta], [*self._fence_args(None), job]

    @staticmethod
    def release_reply(reply: Any) -> JobState:
        """The state a :meth:`release_call`'s job was in; raises :class:`LedgerError` as
        :meth:`release` does."""
        if int(reply[0]) == -1:
            raise LedgerError(text(reply[1]))
        return JobState(text(reply[1]))

    def requeue(self, job: str, *, fence: Fence | None = None) -> bool:
        """Move an admitted job back to its queue, in its old place (failover, no fit found).

        Atomic, so the job is never in neither state. False when it was not admitted. With
        ``fence`` it changes nothing and raises :class:`Fenced` unless the lease key still
        holds the token.
        """
        check_job(job)
        reply = self._scripts.requeue(keys=[self.keys.meta], args=[*self._fence_args(fence), job])
        if int(reply[0]) == -2:
            raise self._fenced(fence)
        if int(reply[0]) == -1:
            raise LedgerError(text(reply[1]))
        return int(reply[0]) == 1

    def park(self, jobs: Sequence[str], why: str, *, fence: Fence | None = None) -> int:
        """Take pending ``jobs`` out of line (``queues/lua/park.lua``): they keep their records
        and their places, but hold no head position, count in no ``pending`` or ``want`` and
        block no strict queue until :meth:`unpark` (or a tree change) puts them back. ``why``
        says what would have to change (``fleet``, ``quota``). Returns how many were parked;
        those not pending, or parked already, are left alone."""
        if not jobs:
            return 0
        for job in jobs:
            check_job(job)
        reply = self._scripts.park(keys=[self.keys.meta], args=[*self._fence_args(fence), why, *jobs])
        if int(reply) == -2:
            raise self._fenced(fence)
        return int(reply)

    def unpark(self, why: str = "", jobs: Sequence[str] = (), *, fence: Fence | None = None) -> int:
        """Put parked jobs back in line, in their old places: those parked for ``why`` (any
        when empty), only ``jobs`` when given. Returns how many came back."""
        reply = self._scripts.unpark(keys=[self.keys.meta], args=[*self._fence_args(fence), why, *jobs])
        if int(reply) == -2:
            raise self._fenced(fence)
        return int(reply)

    def parked(self) -> dict[str, tuple[str, str]]:
        """Parked job -> (its leaf, why it is parked)."""
        out: dict[str, tuple[str, str]] = {}
        for job, value in self.client.hgetall(self.keys.parked).items():
            leaf, _, why = text(value).partition("\t")
            out[text(job)] = (leaf, why)
        return out

    def _fence_args(self, fence: Fence | None) -> list[str]:
        """The two script arguments of a fence; the key must share this ledger's hash slot."""
        if fence is None:
            return ["", ""]
        key, token = fence
        if not isinstance(key, str) or not key or not isinstance(token, str):
            raise InvalidRequest(f"fence: {fence!r} must be a (lease key, token) pair of strings")
        if key_slot(key.encode()) != key_slot(self.keys.meta.encode()):
            raise InvalidRequest(
                f"fence: {key} is not in the ledger's hash slot; give it the hash tag {{{self.keys.tag}}}"
            )
        return [key, token]

    def _fenced(self, fence: Fence | None, decisions: Sequence[Decision] = ()) -> Fenced:
        key, token = fence or ("", "")
        return Fenced(f"fence {key}: token {token} is no longer current; nothing changed", decisions)

    def state(self, job: str) -> JobState:
        pipe = self.client.pipeline(transaction=False)
        pipe.hexists(self.keys.admitted, job)
        pipe.hexists(self.keys.pending, job)
        admitted, pending = pipe.execute()
        if admitted:
            return JobState.ADMITTED
        return JobState.PENDING if pending else JobState.ABSENT

    def states(self, jobs: Sequence[str]) -> list[JobState]:
        """:meth:`state` of many jobs in one round trip (two HMGETs)."""
        if not jobs:
            return []
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.admitted, jobs)
        pipe.hmget(self.keys.pending, jobs)
        admitted, pending = pipe.execute()
        return [
            JobState.ADMITTED if a is not None else JobState.PENDING if p is not None else JobState.ABSENT
            for a, p in zip(admitted, pending, strict=True)
        ]

    def scan(self, state: JobState, cursor: int, count: int) -> tuple[int, list[str]]:
        """One step of a cursor over the admitted (or pending) jobs: the next cursor (0 at the
        end) and about ``count`` job ids. Redis's HSCAN guarantees: a job held from the first step
        to the last is returned at least once (maybe twice); one added or removed meanwhile may
        or may not be. For walks that must not block Redis or the caller (the reconcile)."""
        if state is JobState.ABSENT:
            raise InvalidRequest("scan: only admitted or pending jobs are held")
        key = self.keys.admitted if state is JobState.ADMITTED else self.keys.pending
        cursor, found = self.client.hscan(key, cursor, count=count)
        return int(cursor), [text(job) for job in found]

    def record(self, job: str) -> JobRecord | None:
        """The admitted job's record (leaf and request it is charged with), or None."""
        raw = self.client.hget(self.keys.admitted, job)
        return None if raw is None else decode_record(job, raw)

    def records(self) -> dict[str, JobRecord]:
        """Every admitted job (a full scan: for tools and tests, not for the decision path)."""
        return {
            text(job): decode_record(text(job), raw)
            for job, raw in self.client.hscan_iter(self.keys.admitted, count=1000)
        }

    def nodes(self) -> list[str]:
        """The names of the applied tree's nodes (just the implicit root while there is none)."""
        names = sorted(text(n) for n in self.client.smembers(self.keys.nodes))
        return names or [IMPLICIT_ROOT]

    def usage(self, node: str) -> dict[str, int]:
        """What ``node``'s subtree uses; ``kube-queue/max-jobs`` is its count of admitted jobs."""
        return self.usages([node])[node]

    def usages(self, nodes: Iterable[str]) -> dict[str, dict[str, int]]:
        """:meth:`usage` of several nodes in one round trip."""
        return {
            name: {k[5:]: v for k, v in fields.items() if k.startswith("used:")}
            for name, fields in self._derived(nodes).items()
        }

    def pending_counts(self) -> dict[str, int]:
        """Node -> jobs pending in its subtree."""
        return {name: fields.get("pending", 0) for name, fields in self._derived(self.nodes()).items()}

    def _derived(self, nodes: Iterable[str]) -> dict[str, dict[str, int]]:
        pipe = self.client.pipeline(transaction=False)
        names = list(nodes)
        for name in names:
            pipe.hgetall(self.keys.node(name))
        out: dict[str, dict[str, int]] = {}
        for name, raw in zip(names, pipe.execute(), strict=True):
            fields = ((text(k), text(v)) for k, v in raw.items())
            out[name] = {
                k: int(v) for k, v in fields if (k == "pending" or k.startswith("used:")) and int(v) != 0
            }
        return out

    # -- what a scheduling cycle reads ------------------------------------------------------------

    def epoch(self) -> int:
        """A number that changes whenever usage, pending jobs or the tree change (one HGET)."""
        return int(self.client.hget(self.keys.meta, "epoch") or 0)

    def wait_for_change(self, timeout: float) -> bool:
        """Block until the epoch moves (or has moved since the last such wait returned), at most
        ``timeout`` seconds (keep it below the client's socket timeout); whether it did. An
        element left by a change already seen makes one call return at once: a caller reads the
        ledger after this returns, never instead of reading it."""
        return self.client.blpop([self.keys.wake], timeout=timeout) is not None

    def snapshot(self) -> Snapshot:
        """Every node of the applied tree with its limits and usage, in one round trip (two
        when the tree changed since this instance last read it); see :mod:`queues.snapshot`."""
        names = self._node_names()
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(self.keys.meta, "version", "epoch")
        pipe.hgetall(self.keys.queue_versions)
        for name in names:
            pipe.hgetall(self.keys.node(name))
            pipe.zcard(self.keys.queue(name))
        replies = pipe.execute()
        version, epoch = (int(v or 0) for v in replies[0])
        if version != self._names_version:
            self._names = None
            return self.snapshot()
        rows: dict[str, dict[str, str]] = {}
        for i, name in enumerate(names):
            row = _decoded(replies[2 + 2 * i])
            row["queued"] = str(replies[3 + 2 * i])
            rows[name] = row
        if version == 0:
            rows = {IMPLICIT_ROOT: rows.get(IMPLICIT_ROOT, {})}
        snap = Snapshot.from_rows(rows, version=version, epoch=epoch)
        snap.queue_versions = {text(k): int(v) for k, v in replies[1].items()}
        return snap

    def _node_names(self) -> list[str]:
        if self._names is None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hget(self.keys.meta, "version")
            pipe.smembers(self.keys.nodes)
            version, members = pipe.execute()
            self._names_version = int(version or 0)
            self._names = sorted(text(n) for n in members) or [IMPLICIT_ROOT]
        return self._names

    def class_heads(self, leaves: Sequence[str], count: int = 8) -> dict[str, list[ClassHeads]]:
        """Per leaf, its request classes with pending jobs and the first ``count`` jobs of each
        (see :mod:`queues.heads`); one script run for all the leaves."""
        if not leaves:
            return {}
        reply = self._scripts.heads(keys=[self.keys.meta], args=[str(count), *leaves])
        return parse_heads(reply)

    def running_jobs(self, leaves: Iterable[str]) -> dict[str, list[RunningJob]]:
        """Per leaf, its admitted jobs with priority and request, most recently admitted first."""
        names = list(leaves)
        pipe = self.client.pipeline(transaction=False)
        for leaf in names:
            pipe.zrange(self.keys.running(leaf), 0, -1, withscores=True)
        indexes = pipe.execute()
        jobs = [text(job) for index in indexes for job, _ in index]
        raws = self.client.hmget(self.keys.admitted, jobs) if jobs else []
        records = dict(zip(jobs, raws, strict=True))
        out: dict[str, list[RunningJob]] = {}
        for leaf, index in zip(names, indexes, strict=True):
            found = []
            for raw_job, admission in index:
                job = text(raw_job)
                raw = records.get(job)
                if raw is None:
                    continue  # released since the index was read
                record = decode_record(job, raw)
                found.append(RunningJob(job, record.leaf, record.priority, int(admission), record.request))
            found.sort(key=lambda r: -r.admission)
            out[leaf] = found
        return out

    def position(self, job: str) -> tuple[int, int] | None:
        """A pending job's place in its leaf's queue: (1-based position, queue length), or None."""
        record = self.pending.record(job)
        if record is None:
            return None
        member = f"{record.seq:0{SEQ_WIDTH}d}{job}"
        pipe = self.client.pipeline(transaction=False)
        pipe.zrank(self.keys.queue(record.leaf), member)
        pipe.zcard(self.keys.queue(record.leaf))
        rank, length = pipe.execute()
        return None if rank is None else (int(rank) + 1, int(length))

    def upgrade(self) -> list[Drift]:
        """Recompute the derived fields from the job records once, if they were kept in an older
        shape than :data:`LAYOUT` (a ledger written by an older Fleet), and record the shape;
        returns what was corrected. Idempotent and atomic per step: two callers at once only
        recompute twice. The recomputation is one script over every job (Redis does nothing else
        meanwhile: about 2 s for 100,000 jobs on a loaded machine), so it is paid once per
        ledger, never by a ledger this version started: its first job records the shape."""
        if int(self.client.hget(self.keys.meta, "layout") or 0) >= LAYOUT:
            return []
        drift = self.rebuild(fix=True)
        self.client.hset(self.keys.meta, "layout", LAYOUT)
        return drift

    def rebuild(self, *, fix: bool = False) -> list[Drift]:
        """Recompute usage, pending counts and queues from the job records; report the drift.

        With ``fix`` the counters are overwritten by the recomputed values, in the same atomic
        script. An empty list means the counters agree with the jobs (invariant 2).
        """
        reply = self._scripts.rebuild(keys=[self.keys.meta], args=["1" if fix else "0"])
        if reply and not isinstance(reply[0], list) and int(reply[0]) == -1:
            raise LedgerError(text(reply[1]))
        return [Drift(text(n), text(f), int(s), int(e)) for n, f, s, e in reply]


def _decoded(raw: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """A hash as read (bytes, or text from a client that decodes), as text: the snapshot reads
    a few dozen hashes of about 30 fields each per round, so bytes are decoded in C."""
    try:
        return {k.decode(): v.decode() for k, v in raw.items()}  # type: ignore[union-attr]
    except AttributeError:
        return {text(k): text(v) for k, v in raw.items()}
