"""Self reviews: what the caller may do and who it is, answered from the server's own authorizer.

Kubernetes serves three create-only kinds for this, and kubectl uses each:

* ``SelfSubjectAccessReview`` (``authorization.k8s.io/v1``): ``kubectl auth can-i VERB RESOURCE``
  posts ``spec.resourceAttributes`` (namespace, verb, group, resource, subresource, name) or
  ``spec.nonResourceAttributes`` (path, verb) and prints ``status.allowed`` as yes/no;
* ``SelfSubjectRulesReview`` (``authorization.k8s.io/v1``): ``kubectl auth can-i --list``
  posts ``spec.namespace`` and prints ``status.resourceRules`` and ``nonResourceRules``;
* ``SelfSubjectReview`` (``authentication.k8s.io/v1``, GA in Kubernetes 1.28):
  ``kubectl auth whoami`` prints ``status.userInfo``.

(Kubernetes API reference, "Authorization Resources" and "Authentication Resources"; the shapes of
``SubjectAccessReviewStatus`` and ``SubjectRulesReviewStatus`` in ``k8s.io/api/authorization/v1``.)

The answers come from the same :data:`~fleet.apiserver.app.Authorizer` that guards every request,
asked with the same :class:`~fleet.apiserver.app.Access`: a review can never say yes where the
request would be refused, or the reverse. A rules review asks it for every served kind and verb
in the namespace (cluster-scoped kinds at the cluster scope); that is the registry's size, a few
dozen questions. As in Kubernetes (the ``system:basic-user`` role), any authenticated user may
post reviews about itself; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver.errors import ApiError, BadRequest
from fleet.apiserver.resources import Access, Obj, Registry, ResourceType

__all__ = [
    "ACCESS_REVIEW",
    "GUARDED_PATHS",
    "REVIEW_KINDS",
    "RULES_REVIEW",
    "SELF_REVIEW",
    "AccessCheck",
    "PathCheck",
    "UserInfo",
    "anonymous_info",
    "answer",
    "is_review",
    "no_path_grants",
    "with_reviews",
]

#: Whether the authorizer allows an access. The app builds it from its authorizer.
AccessCheck = Callable[[Access], bool]
#: The ``userInfo`` of a user name (``username``, ``uid``, ``groups``), for ``whoami``.
UserInfo = Callable[[str], Obj]
#: Whether a user may use a guarded non-resource path (:data:`GUARDED_PATHS`): (user, verb, path).
PathCheck = Callable[[str, str, str], bool]


def no_path_grants(user: str, verb: str, path: str) -> bool:
    """The :data:`PathCheck` of a server without authorization: every path is open."""
    return True


_CREATE: Final = ("create",)

ACCESS_REVIEW: Final = ResourceType(
    group="authorization.k8s.io",
    version="v1",
    kind="SelfSubjectAccessReview",
    plural="selfsubjectaccessreviews",
    singular="selfsubjectaccessreview",
    namespaced=False,
    verbs=_CREATE,
    description="Whether the caller may perform an action (kubectl auth can-i); nothing is stored.",
)
RULES_REVIEW: Final = ResourceType(
    group="authorization.k8s.io",
    version="v1",
    kind="SelfSubjectRulesReview",
    plural="selfsubjectrulesreviews",
    singular="selfsubjectrulesreview",
    namespaced=False,
    verbs=_CREATE,
    description="Everything the caller may do in a namespace (kubectl auth can-i --list).",
)
SELF_REVIEW: Final = ResourceType(
    group="authentication.k8s.io",
    version="v1",
    kind="SelfSubjectReview",
    plural="selfsubjectreviews",
    singular="selfsubjectreview",
    namespaced=False,
    verbs=_CREATE,
    description="Who the caller is, as the server authenticated it (kubectl auth whoami).",
)
REVIEW_KINDS: Final = (ACCESS_REVIEW, RULES_REVIEW, SELF_REVIEW)
_REVIEW_KEYS: Final = frozenset(rt.key for rt in REVIEW_KINDS)

#: Paths any authenticated caller may GET (discovery, OpenAPI, version, health): what
#: Kubernetes' ``system:discovery`` and ``system:public-info-viewer`` roles grant.
_NON_RESOURCE_URLS: Final = (
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
)
#: Paths a caller may GET only with a grant of its own (Kubernetes: a ``nonResourceURLs`` rule,
#: as ``system:monitoring`` has for ``/metrics``); the server's ``PathCheck`` decides.
GUARDED_PATHS: Final = ("/metrics",)


@dataclass(frozen=True)
class _Context:
    user: str
    registry: Registry
    allowed: AccessCheck
    user_info: UserInfo
    paths: PathCheck = no_path_grants


def _served(registry: Registry) -> list[ResourceType]:
    """The kinds a review speaks of: every served kind but the reviews themselves."""
    return [rt for rt in registry if rt.key not in _REVIEW_KEYS]


def _verbs(rt: ResourceType, subresource: str | None) -> tuple[str, ...]:
    return ("get", "patch", "update") if subresource else rt.verbs


def _non_resource_allowed(ctx: _Context, path: str, verb: str) -> bool:
    if verb not in ("get", "*"):
        return False
    if path in GUARDED_PATHS:
        return ctx.paths(ctx.user, "get", path)
    for pattern in _NON_RESOURCE_URLS:
        if path == pattern or (pattern.endswith("*") and path.startswith(pattern[:-1])):
            return True
    return False


def _string(spec: Mapping[str, Any], field: str, where: str) -> str:
    value = spec.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{where}.{field}: must be a string")
    return value


def _access_status(ctx: _Context, spec: Mapping[str, Any]) -> Obj:
    """``status`` of a SelfSubjectAccessReview; ``*`` means every served kind or verb."""
    attrs = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(non_resource, Mapping) and not attrs:
        path = _string(non_resource, "path", "spec.nonResourceAttributes")
        verb = _string(non_resource, "verb", "spec.nonResourceAttributes")
        allowed = _non_resource_allowed(ctx, path, verb)
        unserved = not allowed and path not in GUARDED_PATHS  # a guarded one: no grant, no reason
        return {"allowed": allowed, **({"reason": f"{path} is not served to users"} if unserved else {})}
    if not isinstance(attrs, Mapping):
        raise BadRequest("spec: exactly one of resourceAttributes and nonResourceAttributes is required")
    where = "spec.resourceAttributes"
    group, resource = _string(attrs, "group", where), _string(attrs, "resource", where)
    verb, namespace = _string(attrs, "verb", where), _string(attrs, "namespace", where) or None
    name, subresource = _string(attrs, "name", where) or None, _string(attrs, "subresource", where) or None
    kinds = [rt for rt in _served(ctx.registry) if group in ("*", rt.group) and resource in ("*", rt.plural)]
    if not kinds:
        return {"allowed": False, "reason": f'the server serves no resource "{resource}" in group "{group}"'}
    for rt in kinds:
        if subresource is not None and not (subresource == "status" and rt.has_status):
            return {"allowed": False, "reason": f"{rt.qualified} has no subresource {subresource}"}
        verbs = _verbs(rt, subresource) if verb == "*" else (verb,)
        scope = namespace if rt.namespaced else None
        for one in verbs:
            if one not in _verbs(rt, subresource) or not ctx.allowed(
                Access(ctx.user, one, rt, scope, name, subresource)
            ):
                return {"allowed": False}
    return {"allowed": True, "reason": "allowed by the fleet's authorization"}


def _rules_status(ctx: _Context, spec: Mapping[str, Any]) -> Obj:
    """``status`` of a SelfSubjectRulesReview for ``spec.namespace``: one rule per kind."""
    namespace = _string(spec, "namespace", "spec") or None
    rules: list[Obj] = [
        {"verbs": ["create"], "apiGroups": [rt.group], "resources": [rt.plural]} for rt in REVIEW_KINDS
    ]
    for rt in _served(ctx.registry):
        scope = namespace if rt.namespaced else None
        for subresource in (None, "status") if rt.has_status else (None,):
            verbs = [
                verb
                for verb in _verbs(rt, subresource)
                if ctx.allowed(Access(ctx.user, verb, rt, scope, None, subresource))
            ]
            if verbs:
                resource = f"{rt.plural}/{subresource}" if subresource else rt.plural
                rules.append({"verbs": verbs, "apiGroups": [rt.group], "resources": [resource]})
    return {
        "resourceRules": rules,
        "nonResourceRules": [
            {
                "verbs": ["get"],
                "nonResourceURLs": [
                    *_NON_RESOURCE_URLS,
                    *(path for path in GUARDED_PATHS if ctx.paths(ctx.user, "get", path)),
                ],
            }
        ],
        "incomplete": False,
    }


def answer(
    rt: ResourceType,
    body: Any,
    *,
    user: str,
    registry: Registry,
    allowed: AccessCheck,
    user_info: UserInfo,
    paths: PathCheck = no_path_grants,
) -> Obj:
    """The review ``body`` (of kind ``rt``) with its ``status`` filled in for ``user``; ``paths``
    answers for the guarded non-resource paths (:data:`GUARDED_PATHS`)."""
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a {rt.kind} object")
    if body.get("kind") not in (None, "", rt.kind):
        raise BadRequest(
            f"the kind in the data ({body.get('kind')}) does not match the expected kind ({rt.kind})"
        )
    ctx = _Context(user, registry, allowed, user_info, paths)
    spec = body.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise BadRequest("spec: must be an object")
    if rt.key == ACCESS_REVIEW.key:
        status = _access_status(ctx, spec)
    elif rt.key == RULES_REVIEW.key:
        status = _rules_status(ctx, spec)
    elif rt.key == SELF_REVIEW.key:
        status = {"userInfo": user_info(user)}
    else:  # pragma: no cover - the app routes only review kinds here
        raise ApiError(f"{rt.kind} is not a review")
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    return {
        "kind": rt.kind,
        "apiVersion": rt.api_version,
        "metadata": {k: v for k, v in (meta or {}).items() if k == "name"} | {"creationTimestamp": None},
        **({"spec": dict(spec)} if rt.key != SELF_REVIEW.key else {}),
        "status": status,
    }


def is_review(rt: ResourceType) -> bool:
    return rt.key in _REVIEW_KEYS


def anonymous_info(user: str) -> Obj:
    """``userInfo`` when the server knows nothing more than the name."""
    groups = ["system:authenticated"] if user != "system:anonymous" else ["system:unauthenticated"]
    return {"username": user, "groups": groups}


def with_reviews(types: Iterable[ResourceType]) -> list[ResourceType]:
    """``types`` and the three review kinds, for a registry that serves them."""
    return [*types, *REVIEW_KINDS]
