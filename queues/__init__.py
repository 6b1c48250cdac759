"""Quota and queueing for Fleet: the ElasticQuotaTree, its Redis ledger, pending queues.

Every other part of Fleet asks this package one question: may this job start now, and if not,
exactly why. It knows nothing of Kubernetes clusters and never imports :mod:`fleet`.

The tree
    :mod:`queues.tree` models the ElasticQuotaTree as Kube Queue writes it (quantities become exact
    integers through :mod:`queues.quantity`); :mod:`queues.validation` checks it, every problem
    naming the node path, the field and the rule (``root/child-2: min.cpu 20 exceeds max.cpu 10``).
    A job belongs to the leaf that binds its namespace; its quota label may name another leaf
    only where the tree makes that leaf available in the job's namespace (the node attribute
    ``fleet.io/available-in-namespaces``), and a namespace no node binds is refused whatever its
    labels say (:meth:`ElasticQuotaTree.leaf_for <queues.tree.ElasticQuotaTree.leaf_for>`).

The ledger (:mod:`queues.ledger`)
    Redis holds, under one hash tag (:mod:`queues.keys`): the applied tree, compiled to one hash
    per node (its ``max``/``min`` limits and its chain of ancestors) which also holds what its
    subtree uses (``kube-queue/max-jobs`` counting its admitted jobs), how many jobs its subtree
    has pending and what its children are owed; one record per job in either the ``pending``
    or the ``admitted`` hash (leaf, priority, submission sequence, request); and per node a
    sorted set as its queue.

    The record hashes are the truth; the counters are a cache of their sums that makes a decision
    cost O(depth), not O(jobs). Every change is one Lua script (``queues/lua``), so it is atomic:
    admission checks ``used + request <= max`` for every resource each node names on the leaf
    and all its ancestors, plus the min-guarantee borrowing rule, and only then charges them all
    and moves the record from ``pending`` to ``admitted``. A job is therefore never charged
    twice, never charged on half its chain, never both pending and admitted, and never neither:
    release, requeue (back to its old place) and apply are scripts too. Admission and release
    are idempotent per job. :meth:`Ledger.admit_pending_many` sends many decisions to one script
    run, which makes them one after the other exactly as separate scripts would, reading shared
    ancestors once (the run memoises node fields and writes every change through). Redis runs
    a script whole or (on a crash) not at all, and with AOF persistence a restart replays whole
    scripts, so a crash cannot leave half an admission.

    Applying a tree recomputes usage and pending counts from the records, so a changed tree keeps
    its usage; it is refused, before anything is written, when a node that would disappear still
    holds jobs or when a ``max`` would be below what is in use (invariant 1 holds at every step).
    :meth:`Ledger.rebuild` recomputes everything from the records and reports (or fixes) drift.

Limits
    A resource a node's ``max`` does not name is unlimited at that node, as is a ``max`` at or
    above 2**53 (or 2**31-1 for max-jobs). Lua numbers are doubles: every compared amount is below
    2**53 and exact; sums go through Redis ``HINCRBY`` (int64) or an exact two-part accumulator.

Borrowing
    A node whose usage would exceed its ``min`` in a resource is borrowing. It may, only if every
    ancestor that limits the resource keeps enough headroom, after the admission, for what each
    sibling below its ``min`` is owed: what the sibling's pending jobs could use now, up to its
    unused guarantee (``min - used``). What a subtree's jobs could use is what they ask for, capped
    at each node by the room its ``max`` leaves and zero under a node at its max-jobs. Each leaf
    keeps ``want:<r>``, what its pending jobs ask for, each inner node ``kids:<r>``, what its
    children could use, and each node ``due:<r>``, the sum of what its children are owed, all
    updated bottom up along the chain by every script that changes usage or pending jobs, so the
    check reads one number at the parent instead of walking the siblings or their queues. A
    guarantee no waiting job could use is lent (under contention, keeping a waiting team's whole
    unused guarantee free whatever its jobs asked, or while its own max-jobs held them, left
    quota idle that nobody could use). A job larger than a ``max`` of its chain waits in its
    queue but counts as pending nowhere: it can never use a guarantee, so it holds none back.

Queues and order
    :mod:`queues.pending`: per node, ordered by priority then submission. Under the best-effort
    policy the dispatcher may admit any queued job (it skips a blocked head); under the strict
    policy :meth:`Ledger.admit_pending` refuses all but the head. :mod:`queues.views` derives one
    queue per tree node (``root``, ``root-child-2``) from one snapshot: min, max, used, borrowed
    (used beyond min), lent (the part of its unused min that others use now), the share the
    planner orders by, admitted and waiting jobs; and, for one waiting job, its position in its
    leaf's queue and what the quota says of it now (:func:`job_wait`).
    :mod:`queues.reasons` turns a refusal into the pending reason a user reads, e.g.
    ``quota root/child-2: kube-queue/max-jobs 1/1 in use``.

With no tree applied, every job belongs to the implicit ``root``: queue order holds, quota does
not limit (capacity alone does).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from queues.fencing import Fence, Fenced
    from queues.heads import ClassHeads, HeadCache, RunningJob, class_request
    from queues.keys import (
        DEFAULT_KEYS,
        DEFAULT_PREFIX,
        DEFAULT_SPACE,
        DEFAULT_TAG,
        Key,
        KeyFunction,
        KeyParts,
        Keys,
        KeySpace,
        key,
        key_declarations,
        key_function,
        lua_string,
        prefix_problem,
    )
    from queues.ledger import Applied, ApplyRefused, Drift, Ledger, VersionConflict, leaf_in
    from queues.lua_scripts import async_lua_script, lua_script, lua_source, read_lua
    from queues.pending import PendingQueues, QueuePolicy
    from queues.planner import Blocked, Pick, Plan, Planner, PlannerSettings, PreemptionKind, Refused
    from queues.quantity import MAX_JOBS, QuantityError, format_quantity, parse_exact
    from queues.quantity import parse as parse_quantity
    from queues.reasons import Decision, Refusal, RefusalKind
    from queues.records import InvalidRequest, JobRecord, JobState, LedgerError, request_args, score_of
    from queues.snapshot import Snapshot
    from queues.tree import API_VERSION as TREE_API_VERSION
    from queues.tree import (
        AVAILABLE_ATTRIBUTE,
        HIGHEST_USER_PRIORITY,
        IMPLICIT_ROOT,
        MAX_PRIORITY_ATTRIBUTE,
        QUOTA_LABEL,
        TREE_NAMESPACE,
        ElasticQuotaTree,
        PriorityCap,
        QuotaNode,
        QuotaNotAvailable,
        UnboundJob,
        is_unlimited,
        preemption_policy,
        priority_cap,
        queue_name,
    )
    from queues.tree import KIND as TREE_KIND
    from queues.validation import DOCUMENT, Problem, Severity, TreeInvalid, check, load, load_file, validate
    from queues.views import (
        HEADERS,
        QueueView,
        Waiting,
        format_share,
        format_views,
        job_wait,
        job_would_wait,
        queue_views,
    )

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    'Fence': ('queues.fencing', 'Fence'),
    'Fenced': ('queues.fencing', 'Fenced'),
    'ClassHeads': ('queues.heads', 'ClassHeads'),
    'HeadCache': ('queues.heads', 'HeadCache'),
    'RunningJob': ('queues.heads', 'RunningJob'),
    'class_request': ('queues.heads', 'class_request'),
    'DEFAULT_KEYS': ('queues.keys', 'DEFAULT_KEYS'),
    'DEFAULT_PREFIX': ('queues.keys', 'DEFAULT_PREFIX'),
    'DEFAULT_SPACE': ('queues.keys', 'DEFAULT_SPACE'),
    'DEFAULT_TAG': ('queues.keys', 'DEFAULT_TAG'),
    'Key': ('queues.keys', 'Key'),
    'KeyFunction': ('queues.keys', 'KeyFunction'),
    'KeyParts': ('queues.keys', 'KeyParts'),
    'Keys': ('queues.keys', 'Keys'),
    'KeySpace': ('queues.keys', 'KeySpace'),
    'key': ('queues.keys', 'key'),
    'key_declarations': ('queues.keys', 'key_declarations'),
    'key_function': ('queues.keys', 'key_function'),
    'lua_string': ('queues.keys', 'lua_string'),
    'prefix_problem': ('queues.keys', 'prefix_problem'),
    'Applied': ('queues.ledger', 'Applied'),
    'ApplyRefused': ('queues.ledger', 'ApplyRefused'),
    'Drift': ('queues.ledger', 'Drift'),
    'Ledger': ('queues.ledger', 'Ledger'),
    'VersionConflict': ('queues.ledger', 'VersionConflict'),
    'leaf_in': ('queues.ledger', 'leaf_in'),
    'async_lua_script': ('queues.lua_scripts', 'async_lua_script'),
    'lua_script': ('queues.lua_scripts', 'lua_script'),
    'lua_source': ('queues.lua_scripts', 'lua_source'),
    'read_lua': ('queues.lua_scripts', 'read_lua'),
    'PendingQueues': ('queues.pending', 'PendingQueues'),
    'QueuePolicy': ('queues.pending', 'QueuePolicy'),
    'Blocked': ('queues.planner', 'Blocked'),
    'Pick': ('queues.planner', 'Pick'),
    'Plan': ('queues.planner', 'Plan'),
    'Planner': ('queues.planner', 'Planner'),
    'PlannerSettings': ('queues.planner', 'PlannerSettings'),
    'PreemptionKind': ('queues.planner', 'PreemptionKind'),
    'Refused': ('queues.planner', 'Refused'),
    'MAX_JOBS': ('queues.quantity', 'MAX_JOBS'),
    'QuantityError': ('queues.quantity', 'QuantityError'),
    'format_quantity': ('queues.quantity', 'format_quantity'),
    'parse_exact': ('queues.quantity', 'parse_exact'),
    'parse_quantity': ('queues.quantity', 'parse'),
    'Decision': ('queues.reasons', 'Decision'),
    'Refusal': ('queues.reasons', 'Refusal'),
    'RefusalKind': ('queues.reasons', 'RefusalKind'),
    'InvalidRequest': ('queues.records', 'InvalidRequest'),
    'JobRecord': ('queues.records', 'JobRecord'),
    'JobState': ('queues.records', 'JobState'),
    'LedgerError': ('queues.records', 'LedgerError'),
    'request_args': ('queues.records', 'request_args'),
    'score_of': ('queues.records', 'score_of'),
    'Snapshot': ('queues.snapshot', 'Snapshot'),
    'TREE_API_VERSION': ('queues.tree', 'API_VERSION'),
    'AVAILABLE_ATTRIBUTE': ('queues.tree', 'AVAILABLE_ATTRIBUTE'),
    'IMPLICIT_ROOT': ('queues.tree', 'IMPLICIT_ROOT'),
    'QUOTA_LABEL': ('queues.tree', 'QUOTA_LABEL'),
    'TREE_NAMESPACE': ('queues.tree', 'TREE_NAMESPACE'),
    'ElasticQuotaTree': ('queues.tree', 'ElasticQuotaTree'),
    'QuotaNode': ('queues.tree', 'QuotaNode'),
    'QuotaNotAvailable': ('queues.tree', 'QuotaNotAvailable'),
    'UnboundJob': ('queues.tree', 'UnboundJob'),
    'is_unlimited': ('queues.tree', 'is_unlimited'),
    'preemption_policy': ('queues.tree', 'preemption_policy'),
    'queue_name': ('queues.tree', 'queue_name'),
    'TREE_KIND': ('queues.tree', 'KIND'),
    'DOCUMENT': ('queues.validation', 'DOCUMENT'),
    'Problem': ('queues.validation', 'Problem'),
    'Severity': ('queues.validation', 'Severity'),
    'TreeInvalid': ('queues.validation', 'TreeInvalid'),
    'check': ('queues.validation', 'check'),
    'load': ('queues.validation', 'load'),
    'load_file': ('queues.validation', 'load_file'),
    'validate': ('queues.validation', 'validate'),
    'HEADERS': ('queues.views', 'HEADERS'),
    'QueueView': ('queues.views', 'QueueView'),
    'Waiting': ('queues.views', 'Waiting'),
    'format_share': ('queues.views', 'format_share'),
    'format_views': ('queues.views', 'format_views'),
    'job_wait': ('queues.views', 'job_wait'),
    'job_would_wait': ('queues.views', 'job_would_wait'),
    'queue_views': ('queues.views', 'queue_views'),
    'HIGHEST_USER_PRIORITY': ('queues.tree', 'HIGHEST_USER_PRIORITY'),
    'MAX_PRIORITY_ATTRIBUTE': ('queues.tree', 'MAX_PRIORITY_ATTRIBUTE'),
    'PriorityCap': ('queues.tree', 'PriorityCap'),
    'priority_cap': ('queues.tree', 'priority_cap'),
}


def __getattr__(name: str) -> Any:
    found = _FACE.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(found[0]), found[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACE})

__all__ = [
    "AVAILABLE_ATTRIBUTE",
    "DEFAULT_KEYS",
    "DEFAULT_PREFIX",
    "DEFAULT_SPACE",
    "DEFAULT_TAG",
    "DOCUMENT",
    "HEADERS",
    "HIGHEST_USER_PRIORITY",
    "IMPLICIT_ROOT",
    "MAX_JOBS",
    "MAX_PRIORITY_ATTRIBUTE",
    "QUOTA_LABEL",
    "TREE_API_VERSION",
    "TREE_KIND",
    "TREE_NAMESPACE",
    "Applied",
    "ApplyRefused",
    "Blocked",
    "ClassHeads",
    "Decision",
    "Drift",
    "ElasticQuotaTree",
    "Fence",
    "Fenced",
    "HeadCache",
    "InvalidRequest",
    "JobRecord",
    "JobState",
    "Key",
    "KeyFunction",
    "KeyParts",
    "KeySpace",
    "Keys",
    "Ledger",
    "LedgerError",
    "PendingQueues",
    "Pick",
    "Plan",
    "Planner",
    "PlannerSettings",
    "PreemptionKind",
    "PriorityCap",
    "Problem",
    "QuantityError",
    "QueuePolicy",
    "QueueView",
    "QuotaNode",
    "QuotaNotAvailable",
    "Refusal",
    "RefusalKind",
    "Refused",
    "RunningJob",
    "Severity",
    "Snapshot",
    "TreeInvalid",
    "UnboundJob",
    "VersionConflict",
    "Waiting",
    "async_lua_script",
    "check",
    "class_request",
    "format_quantity",
    "format_share",
    "format_views",
    "is_unlimited",
    "job_wait",
    "job_would_wait",
    "key",
    "key_declarations",
    "key_function",
    "leaf_in",
    "load",
    "load_file",
    "lua_script",
    "lua_source",
    "lua_string",
    "parse_exact",
    "parse_quantity",
    "preemption_policy",
    "prefix_problem",
    "priority_cap",
    "queue_name",
    "queue_views",
    "read_lua",
    "request_args",
    "score_of",
    "validate",
]
