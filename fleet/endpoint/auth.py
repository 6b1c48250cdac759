"""Who may do what at the fleet endpoint: bearer tokens from a static token file, and its roles.

Authentication reads a Kubernetes static token file (the ``--token-auth-file`` format of
kube-apiserver): one CSV line per token, ``token,user,uid,"group1,group2"`` (groups optional).
A request carries ``Authorization: Bearer <token>``; an unknown or missing token is 401.

Authorization knows three kinds of group, so that a token file is the whole policy:

``fleet:admins``
    May do everything: apply the quota tree and policies, write job status, delete anything.
``namespace:<ns>``
    May create, read (get, list, watch), update and patch (their metadata: labels, annotations,
    their own finalizers; :mod:`fleet.jobs.updates`), explain (the ``explain`` subresource:
    ``fleet explain``) and delete jobs of every kind Fleet serves in ``<ns>``,
    read its Events (what ``kubectl describe`` lists), do anything with its ConfigMaps, Secrets
    and Services (the objects its jobs reference; another namespace's are as closed as its
    jobs), and read its Namespace: a list or watch of namespaces shows only the namespaces of the
    token (:meth:`FleetAuthorizer.visible`). Any authenticated user may read the fleet's shared
    picture: Queues, MemberClusters, the ElasticQuotaTree, (Cluster)PropagationPolicies and
    PriorityClasses (the names a job may give as its priorityClass, and their values, which
    order the queues). Kubernetes' default RBAC grants authenticated users none of these (its
    ``system:basic-user``, ``system:discovery`` and ``system:public-info-viewer`` roles,
    ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``, cover self reviews, discovery and
    version only; a cluster admin grants more); Fleet's roles are the whole policy, and this
    is the part of it every tenant needs to write a job.

``fleet:metrics-readers``
    May read the API's ``/metrics`` (and nothing else: the group grants no namespace), as
    Kubernetes' ``system:monitoring`` role grants the ``nonResourceURLs`` ``/metrics``: give
    Prometheus a token of this group (``deploy/README.md``). Admins may read it too; a tenant's
    token gets 403 (``forbidden: User "alice" cannot get path "/metrics"``), since the metrics
    name every queue and member of the fleet.

``kubectl auth can-i`` (with ``--list``) and ``kubectl auth whoami`` are answered from this same
authorizer (:mod:`fleet.apiserver.reviews`), so what they say is what the API does.

Everything else is 403, worded as kube-apiserver words it (``User "alice" cannot create resource
"ascendjobs" in API group "mindxdl.gitee.com" in the namespace "b"``) so kubectl prints the
familiar line. A user may update or patch a job of its namespaces as RBAC's ``update`` would
allow, and the job backend then refuses (422, naming the field) what Fleet owns: the spec (what
was queued and charged), except the switch of a kind that has one (T9k's pause, Kubeflow's
suspend), Fleet's finalizer, labels and annotations (:mod:`fleet.jobs.updates`). A user may not
write a job's ``status`` (that is Fleet's). Users are identified by name: one user
name's tokens must all carry the same groups, which the loader checks, so a user's rights never
depend on which token was used.
Tokens are secrets: no ``repr``, error or log line here contains one.

The token file is read again while the API runs (:class:`TokenFile`): a change (its size, time or
inode) is noticed within a second of the next request, as kube-apiserver's reloadable
authenticators do for their files, so an admin adds or revokes a token without a restart. A file
that no longer parses keeps the tokens read before, with a log line saying why.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fleet.apiserver import COMPANION_KINDS, Access, Forbidden
from fleet.kinds import (
    ELASTIC_QUOTA_TREE,
    EXPLAIN,
    FLEET_EVENT,
    FLEET_JOB_KINDS,
    FLEET_NAMESPACE,
    MEMBER_CLUSTER,
    POLICY_KINDS,
    PRIORITY_CLASS,
    QUEUE,
)
from fleet.workloads import RUNTIME_KINDS

__all__ = [
    "ADMIN_GROUP",
    "METRICS_GROUP",
    "NAMESPACE_GROUP_PREFIX",
    "FleetAuthorizer",
    "Identity",
    "TokenAuthenticator",
    "TokenFile",
    "TokenFileError",
    "forbidden",
    "load_token_file",
    "parse_token_file",
]

#: Members of this group may do everything.
ADMIN_GROUP: Final = "fleet:admins"
#: Members of this group may read the API's ``/metrics`` (Prometheus' token).
METRICS_GROUP: Final = "fleet:metrics-readers"
#: ``namespace:<ns>`` grants the jobs of every kind (and the Events) of ``<ns>``.
NAMESPACE_GROUP_PREFIX: Final = "namespace:"

_READ: Final = frozenset({"get", "list", "watch"})
#: Kubeflow Trainer's runtimes: a namespace's are its users', like its ConfigMaps; the
#: cluster-wide ones every user may read and only admins write (as PriorityClasses).
NAMESPACED_RUNTIMES: Final = tuple(rt for rt in RUNTIME_KINDS if rt.namespaced)
CLUSTER_RUNTIMES: Final = tuple(rt for rt in RUNTIME_KINDS if not rt.namespaced)
#: The job kinds (every one of :data:`fleet.workloads.KINDS`), by storage identity.
_JOB_KINDS: Final = frozenset(rt.key for rt in FLEET_JOB_KINDS)
_JOB_VERBS: Final = frozenset(
    {"create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"}
)
#: The ConfigMaps, Secrets and Services of a user's namespaces are the user's, like its jobs.
_COMPANIONS: Final = frozenset(rt.key for rt in (*COMPANION_KINDS, *NAMESPACED_RUNTIMES))
#: Kinds every authenticated user may read, in any namespace.
_SHARED: Final = frozenset(
    rt.key
    for rt in (QUEUE, MEMBER_CLUSTER, ELASTIC_QUOTA_TREE, *POLICY_KINDS, PRIORITY_CLASS, *CLUSTER_RUNTIMES)
)


class TokenFileError(ValueError):
    """A token file that cannot be used; the message names the line, never the token."""


@dataclass(frozen=True)
class Identity:
    user: str
    uid: str
    groups: frozenset[str]

    @property
    def admin(self) -> bool:
        return ADMIN_GROUP in self.groups

    @property
    def namespaces(self) -> frozenset[str]:
        """The namespaces whose jobs this identity may submit, read and delete."""
        prefix = len(NAMESPACE_GROUP_PREFIX)
        return frozenset(
            g[prefix:] for g in self.groups if g.startswith(NAMESPACE_GROUP_PREFIX) and g[prefix:]
        )


def parse_token_file(text: str, *, source: str = "token file") -> dict[str, Identity]:
    """Token -> identity from the CSV text of a static token file.

    Blank lines and lines starting with ``#`` are skipped. Raises :class:`TokenFileError` for a
    line without token, user and uid, a token listed twice, or one user with different groups.
    """
    tokens: dict[str, Identity] = {}
    by_user: dict[str, Identity] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        cells = [cell.strip() for cell in row]
        if len(cells) < 3 or not all(cells[:3]):
            raise TokenFileError(f'{source}: line {number}: expected token,user,uid[,"group1,group2"]')
        if len(cells) > 4:
            raise TokenFileError(f'{source}: line {number}: quote the groups: token,user,uid,"g1,g2"')
        token, user, uid = cells[:3]
        groups = frozenset(g.strip() for g in (cells[3] if len(cells) > 3 else "").split(",") if g.strip())
        identity = Identity(user, uid, groups)
        if token in tokens:
            raise TokenFileError(f"{source}: line {number}: this token is already listed for another line")
        known = by_user.setdefault(user, identity)
        if known != identity:
            raise TokenFileError(
                f"{source}: line {number}: user {user!r} is listed before with another uid or groups"
            )
        tokens[token] = identity
    return tokens


def load_token_file(path: str | Path) -> dict[str, Identity]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise TokenFileError(f"token file {path}: {error.strerror or error}") from None
    return parse_token_file(text, source=f"token file {path}")


log = logging.getLogger("fleet.api")


class TokenFile:
    """A static token file, read again when it changes (checked at most every ``interval``
    seconds, on use). Raises :class:`TokenFileError` at construction when it cannot be read; a
    later change that cannot be read or parsed keeps the tokens read before (and says why)."""

    def __init__(self, path: str | Path, *, interval: float = 1.0) -> None:
        self.path = Path(path)
        self.interval = interval
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._seen = self._stamp()
        self._tokens = load_token_file(self.path)
        self._users = _users_of(self._tokens.values())

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return found.st_ino, found.st_size, found.st_mtime_ns

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.interval:
            return
        with self._lock:
            if now - self._checked < self.interval:
                return
            self._checked = now
            stamp = self._stamp()
            if stamp is None or stamp == self._seen:
                return
            self._seen = stamp
            try:
                tokens = load_token_file(self.path)
            except TokenFileError as error:
                log.warning("event=tokens_not_reloaded error=%s (the tokens read before are kept)", error)
                return
            self._tokens, self._users = tokens, _users_of(tokens.values())
            log.info("event=tokens_reloaded tokens=%d users=%d", len(tokens), len(self._users))

    def tokens(self) -> Mapping[str, Identity]:
        self._refresh()
        return self._tokens

    def users(self) -> Mapping[str, Identity]:
        self._refresh()
        return self._users

    def __repr__(self) -> str:  # never show tokens
        return f"TokenFile({str(self.path)!r})"


def _users_of(identities: Iterable[Identity]) -> dict[str, Identity]:
    return {identity.user: identity for identity in identities}


class TokenAuthenticator:
    """The serving core's ``Authenticator``: ``Authorization: Bearer <token>`` -> user name.

    Over a fixed map of tokens, or a :class:`TokenFile` (read again when it changes)."""

    def __init__(self, tokens: Mapping[str, Identity] | TokenFile) -> None:
        self._source = tokens if isinstance(tokens, TokenFile) else None
        self._fixed = {} if isinstance(tokens, TokenFile) else dict(tokens)

    @property
    def _tokens(self) -> Mapping[str, Identity]:
        return self._source.tokens() if self._source is not None else self._fixed

    def __call__(self, headers: Mapping[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        found = self._tokens.get(token.strip())
        return None if found is None else found.user

    def identities(self) -> Iterable[Identity]:
        return self._tokens.values()

    def __repr__(self) -> str:  # never show tokens
        return f"TokenAuthenticator({len(self._tokens)} tokens)"


class FleetAuthorizer:
    """The serving core's ``Authorizer``: the roles of the module docstring."""

    def __init__(self, identities: Iterable[Identity] | TokenFile) -> None:
        self._source = identities if isinstance(identities, TokenFile) else None
        self._fixed = {} if isinstance(identities, TokenFile) else _users_of(identities)

    @property
    def _users(self) -> Mapping[str, Identity]:
        return self._source.users() if self._source is not None else self._fixed

    def allows(self, access: Access) -> bool:
        identity = self._users.get(access.user)
        if identity is None:
            return False
        if identity.admin:
            return True
        key = access.resource.key
        if key in _SHARED:
            return access.verb in _READ
        if key == FLEET_NAMESPACE.key:  # a list shows only the caller's (see visible)
            return access.verb in _READ and (access.name is None or access.name in identity.namespaces)
        if access.namespace is None or access.namespace not in identity.namespaces:
            return False
        if key in _JOB_KINDS:
            if access.subresource == EXPLAIN.name:  # an answer about a job; nothing is written
                return access.verb in EXPLAIN.verbs
            writes_status = access.subresource is not None and access.verb not in _READ
            # An update reaches the job backend, which lets it change the owners' metadata and a
            # kind's switch (pause, suspend), nothing Fleet owns (fleet.jobs.updates).
            return access.verb in _JOB_VERBS and not writes_status
        if key == FLEET_EVENT.key:
            return access.verb in _READ
        return key in _COMPANIONS  # every verb, in the user's own namespaces only

    def allows_path(self, user: str, verb: str, path: str) -> bool:
        """The serving core's ``PathCheck``: whether ``user`` may ``verb`` the guarded non-resource
        ``path`` (``/metrics``: admins and :data:`METRICS_GROUP`)."""
        identity = self._users.get(user)
        if identity is None or verb != "get":
            return False
        if path == "/metrics":
            return identity.admin or METRICS_GROUP in identity.groups
        return True

    def visible(self, access: Access, obj: Mapping[str, Any]) -> bool:
        """Whether a listed or watched object may be shown: a tenant's namespaces only."""
        identity = self._users.get(access.user)
        if identity is None or identity.admin or access.resource.key != FLEET_NAMESPACE.key:
            return identity is not None
        return (obj.get("metadata") or {}).get("name") in identity.namespaces

    def user_info(self, user: str) -> dict[str, Any]:
        """Who ``user`` is, as ``kubectl auth whoami`` shows it (Kubernetes adds
        ``system:authenticated`` to every authenticated user's groups)."""
        identity = self._users.get(user)
        if identity is None:
            return {"username": user, "groups": ["system:authenticated"]}
        groups = [*sorted(identity.groups), "system:authenticated"]
        return {"username": identity.user, "uid": identity.uid, "groups": groups}

    def __call__(self, access: Access) -> None:
        if not self.allows(access):
            raise forbidden(access, self._hint(access))

    def _hint(self, access: Access) -> str:
        identity = self._users.get(access.user)
        if identity is None:
            return "the user has no identity in the token file"
        namespaces = ", ".join(sorted(identity.namespaces)) or "none"
        if access.resource.key in _JOB_KINDS and access.namespace in identity.namespaces:
            return "a job's status is written by Fleet"
        return f"only {ADMIN_GROUP} may do this; the token grants jobs in namespaces: {namespaces}"


def forbidden(access: Access, hint: str = "") -> Forbidden:
    """The 403 of ``access``, worded as kube-apiserver words it (kubectl prints it as is)."""
    rt = access.resource
    resource = f"{rt.plural}/{access.subresource}" if access.subresource else rt.plural
    subject = f'{rt.qualified} "{access.name}"' if access.name else rt.qualified
    where = f'in the namespace "{access.namespace}"' if access.namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{access.user}" cannot {access.verb} resource "{resource}" '
        f'in API group "{rt.group}" {where}'
    )
    details: dict[str, str] = {"group": rt.group, "kind": rt.plural}
    if access.name:
        details["name"] = access.name
    return Forbidden(f"{message}: {hint}" if hint else message, details=details)
