"""Member access: how Fleet reaches its member clusters, through the official ``kubernetes`` client.

Members are ordinary Kubernetes API servers (in tests and ``fleet up``, the project's simulator).
Fleet never speaks raw HTTP to them and keeps no in-process fake of them: every request goes over
the network through ``kubernetes.client``, exactly as it would against a production cluster.

The parts, each in its own module:

``clients``
    Where clients come from. A :class:`ClientFactory` lists the members and builds one
    authenticated ``ApiClient`` per member; :class:`KubeconfigClients` does so from a kubeconfig
    (one context per member, every context but ``fleet``). Credentials stay inside the client's
    configuration: no ``repr``, exception or log line here prints them. An in-cluster or
    secret-backed factory can replace the kubeconfig one without touching anything else.
``settings``
    :class:`MemberSettings`, per member: connect and request timeouts, attempts and backoff, probe
    timeout, watch pacing, page size, pool size. Validated when built.
``retry``
    The single retry policy (tenacity): every call is timed, retried with exponential backoff and
    jitter on transient failures (connection refused or reset, timeouts, 429, 500, 502, 503, 504;
    ``Retry-After`` honoured) and never on permanent ones. The HTTP stack's own retries are off,
    so a request is retried in one place only.
``errors``
    What failures look like to callers: :class:`MemberUnavailable` (transient, retries spent),
    :class:`MemberRefused` with ``code``/``reason``/``message``/``causes`` (permanent), and its
    subclasses :class:`NotFound` and :class:`Conflict`.
``refusals``
    Whose fault a refusal is (:func:`scope_of`): the job's, which every member would repeat (a
    422 from the API server's own validation), or the member's (its rights, set-up, policy).
``access``
    :class:`Member`: the calls the dispatcher, workers, syncers and placement make. Jobs of any kind
    (``create_job`` creates the namespace when the member lacks it; ``delete_job`` is idempotent
    and, given a uid, deletes only that copy), the ConfigMaps, Secrets and Services beside them,
    nodes and pods (paged lists from one snapshot), and ``probe()`` (one short ``GET /readyz``, no
    retry: health thresholds are the caller's). Objects are plain JSON dicts as the member sent them.
    ``close()`` stops the member's watchers and releases its connections.
``rest``
    :class:`~fleet.members.rest.Rest`: a resource's REST call (get, create, replace, delete,
    list or watch) through the client's ``ApiClient`` (its URL building, authentication, TLS,
    pool and errors), without the generated API classes: ``CoreV1Api`` costs 0.7 s of CPU to
    import in every process, and the generated methods re-walk each body before encoding it.
``resource``
    :class:`Resource`, a kind listed and watched in members (:data:`NODES`, :data:`PODS`, the job
    kinds), and :class:`Listing`, a list's items and resourceVersion.
``watch``
    :class:`Watcher`: list, then watch from the list's resourceVersion with bookmarks; resume from
    the last resourceVersion after any disconnect (backoff while the member is down or answers
    503); on 410 Gone list again and deliver a ``SYNC`` event carrying the whole state and the
    objects that vanished meanwhile. ``stop()`` returns at once.
``metrics``
    Prometheus counters and histograms per member: request latency, errors, retries, watch
    restarts, relists and events.

Log lines are ``key=value`` on the ``fleet.members`` loggers (``member=... kind=... event=...``).
"""

from typing import TYPE_CHECKING, Final

from fleet.lazy_face import lazy_face

if TYPE_CHECKING:
    from fleet.members.access import Member, Probe
    from fleet.members.changes import KubeconfigChanges, MemberChanges
    from fleet.members.clients import (
        MEMBER_EXTENSION,
        ClientFactory,
        KubeconfigClients,
        MemberConfigError,
        load_members,
        member_labels,
    )
    from fleet.members.errors import (
        Conflict,
        MemberError,
        MemberRefused,
        MemberUnavailable,
        NotFound,
        redact,
        safe_message,
    )
    from fleet.members.guard import BulkheadFull
    from fleet.members.guard import State as BreakerState
    from fleet.members.guard import Transition as BreakerTransition
    from fleet.members.names import FLEET_CONTEXT
    from fleet.members.refusals import Scope, scope_of
    from fleet.members.refusals import describe as describe_refusal
    from fleet.members.resource import NODES, PODS, Listing, Resource
    from fleet.members.rights import member_manifest
    from fleet.members.secret import (
        MemberSecret,
        SecretError,
        member_entry,
        members_of,
        with_member,
        without_member,
    )
    from fleet.members.settings import MemberSettings, SettingsError
    from fleet.members.watch import (
        ADDED,
        DELETED,
        MODIFIED,
        SYNC,
        BatchCallback,
        EventCallback,
        Watcher,
        WatchEvent,
    )

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    "Member": ("fleet.members.access", "Member"),
    "Probe": ("fleet.members.access", "Probe"),
    "KubeconfigChanges": ("fleet.members.changes", "KubeconfigChanges"),
    "MemberChanges": ("fleet.members.changes", "MemberChanges"),
    "FLEET_CONTEXT": ("fleet.members.names", "FLEET_CONTEXT"),
    "MEMBER_EXTENSION": ("fleet.members.clients", "MEMBER_EXTENSION"),
    "ClientFactory": ("fleet.members.clients", "ClientFactory"),
    "KubeconfigClients": ("fleet.members.clients", "KubeconfigClients"),
    "MemberConfigError": ("fleet.members.clients", "MemberConfigError"),
    "load_members": ("fleet.members.clients", "load_members"),
    "member_labels": ("fleet.members.clients", "member_labels"),
    "Conflict": ("fleet.members.errors", "Conflict"),
    "MemberError": ("fleet.members.errors", "MemberError"),
    "MemberRefused": ("fleet.members.errors", "MemberRefused"),
    "MemberUnavailable": ("fleet.members.errors", "MemberUnavailable"),
    "NotFound": ("fleet.members.errors", "NotFound"),
    "redact": ("fleet.members.errors", "redact"),
    "safe_message": ("fleet.members.errors", "safe_message"),
    "BulkheadFull": ("fleet.members.guard", "BulkheadFull"),
    "BreakerState": ("fleet.members.guard", "State"),
    "BreakerTransition": ("fleet.members.guard", "Transition"),
    "Scope": ("fleet.members.refusals", "Scope"),
    "scope_of": ("fleet.members.refusals", "scope_of"),
    "describe_refusal": ("fleet.members.refusals", "describe"),
    "NODES": ("fleet.members.resource", "NODES"),
    "PODS": ("fleet.members.resource", "PODS"),
    "Listing": ("fleet.members.resource", "Listing"),
    "Resource": ("fleet.members.resource", "Resource"),
    "member_manifest": ("fleet.members.rights", "member_manifest"),
    "MemberSecret": ("fleet.members.secret", "MemberSecret"),
    "SecretError": ("fleet.members.secret", "SecretError"),
    "member_entry": ("fleet.members.secret", "member_entry"),
    "members_of": ("fleet.members.secret", "members_of"),
    "with_member": ("fleet.members.secret", "with_member"),
    "without_member": ("fleet.members.secret", "without_member"),
    "MemberSettings": ("fleet.members.settings", "MemberSettings"),
    "SettingsError": ("fleet.members.settings", "SettingsError"),
    "ADDED": ("fleet.members.watch", "ADDED"),
    "DELETED": ("fleet.members.watch", "DELETED"),
    "MODIFIED": ("fleet.members.watch", "MODIFIED"),
    "SYNC": ("fleet.members.watch", "SYNC"),
    "BatchCallback": ("fleet.members.watch", "BatchCallback"),
    "EventCallback": ("fleet.members.watch", "EventCallback"),
    "Watcher": ("fleet.members.watch", "Watcher"),
    "WatchEvent": ("fleet.members.watch", "WatchEvent"),
}


lazy_face(__name__, _FACE)


__all__ = [
    "ADDED",
    "DELETED",
    "FLEET_CONTEXT",
    "MEMBER_EXTENSION",
    "MODIFIED",
    "NODES",
    "PODS",
    "SYNC",
    "BatchCallback",
    "BreakerState",
    "BreakerTransition",
    "BulkheadFull",
    "ClientFactory",
    "Conflict",
    "EventCallback",
    "KubeconfigChanges",
    "KubeconfigClients",
    "Listing",
    "Member",
    "MemberChanges",
    "MemberConfigError",
    "MemberError",
    "MemberRefused",
    "MemberSecret",
    "MemberSettings",
    "MemberUnavailable",
    "NotFound",
    "Probe",
    "Resource",
    "Scope",
    "SecretError",
    "SettingsError",
    "WatchEvent",
    "Watcher",
    "describe_refusal",
    "load_members",
    "member_entry",
    "member_labels",
    "member_manifest",
    "members_of",
    "redact",
    "safe_message",
    "scope_of",
    "with_member",
    "without_member",
]
