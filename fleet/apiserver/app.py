"""The HTTP face of the serving core: a Starlette app speaking the Kubernetes API conventions.

``build_app(registry, store)`` serves every kind in ``registry`` from ``store``: discovery and
OpenAPI, list/get/create/update/patch/delete/deletecollection, the ``status`` subresource, watch
as a chunked stream of JSON lines, Table output for kubectl, and errors as ``Status`` objects.
Request-level policy lives here (decoding, unknown and duplicate fields by ``fieldValidation``
(:mod:`~fleet.apiserver.fields`), create-time defaulting, validation,
dry run, patch application, the retry of patches without a resourceVersion on conflicts);
storage semantics (versions, conflicts, history) live in the store; what a body may cost (size,
depth, YAML aliases) is bounded in :mod:`fleet.apiserver.bodies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from fleet import fastjson
from fleet.apiserver import apply as ssa
from fleet.apiserver import bodies, discovery, fields, protobuf, reviews
from fleet.apiserver.errors import (
    ApiError,
    BadRequest,
    Cause,
    Conflict,
    Forbidden,
    Invalid,
    MethodNotAllowed,
    NotFound,
    Unauthorized,
    UnsupportedMediaType,
    status_object,
)
from fleet.apiserver.patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from fleet.apiserver.resources import Access, Obj, Registry, ResourceType
from fleet.apiserver.schema import schema_causes
from fleet.apiserver.selectors import FieldSelector, LabelSelector
from fleet.apiserver.store import (
    BOOKMARK,
    ERROR,
    FRESH_WAIT_SECONDS,
    Store,
    WatchEvent,
    parse_resource_version,
    too_large,
)
from fleet.apiserver.tables import build_table, wants_table
from fleet.apiserver.validation import validate_metadata
from fleet.cancelling import cancel_and_wait

__all__ = [
    "Access",
    "Authenticator",
    "Authorizer",
    "StreamHub",
    "SubresourceHandler",
    "TokenAuthenticator",
    "Visibility",
    "build_app",
    "default_version_info",
]

log = logging.getLogger("fleet.apiserver")

#: Decides who a request is from (a user name) or ``None`` to answer 401; sees headers only.
Authenticator = Callable[[Mapping[str, str]], str | None]


#: Decides whether a request may go on: returns, or raises ``Forbidden`` (403).
Authorizer = Callable[[Access], None]
#: The answer of a subresource of :attr:`ResourceType.subresources`: given the authorized access
#: and, for ``create``, the object sent (decoded and validated as a create's), the object to
#: answer with. Raises :class:`ApiError` to refuse.
SubresourceHandler = Callable[[Access, Obj | None], Awaitable[Obj]]
#: Whether an object a list or watch let through may be shown to the requester (a tenant sees
#: only its own namespaces in ``kubectl get namespaces``); ``None``: everything listed is shown.
Visibility = Callable[[Access, Obj], bool]

_JSON: Final = "application/json"
_MERGE_PATCH: Final = "application/merge-patch+json"
_JSON_PATCH: Final = "application/json-patch+json"
_STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
#: How long a patch without a resourceVersion goes on retrying on conflicts (each retry follows a
#: write by someone else, so this bounds only a pathologically hot object; Kubernetes retries
#: within its 60-second request timeout).
_PATCH_RETRY_SECONDS: Final = 30.0
_BODY_TYPES: Final = frozenset({_JSON, _MERGE_PATCH, _JSON_PATCH, _STRATEGIC_PATCH, *bodies.YAML_TYPES})
_DEFAULT_BOOKMARK_INTERVAL: Final = 30.0
_MAX_WATCH_SECONDS: Final = 3600.0
_WATCH_BATCH: Final = 256  # watch events at most per socket write
# Not worth a warning: the normal outcome of a GET before create, of a race, of a stale watch.
_QUIET_CODES: Final = frozenset({404, 409, 410})
#: The verbs whose request carries an object.
_BODY_VERBS: Final = frozenset({"create", "update", "patch"})
#: The verb of each method on a named object.
_ITEM_VERBS: Final = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class TokenAuthenticator:
    """Bearer-token authentication: ``Authorization: Bearer <token>`` mapped to a user name."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = dict(tokens)

    def __call__(self, headers: Mapping[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._tokens.get(token.strip())

    def __repr__(self) -> str:  # never show tokens
        return f"TokenAuthenticator({len(self._tokens)} tokens)"


class StreamHub:
    """Open watch streams of one app, so that stopping a listener can end them promptly."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()
        self.open = 0

    def close_all(self) -> None:
        self.closing.set()

    def reopen(self) -> None:
        self.closing = asyncio.Event()


def default_version_info() -> Obj:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-fleet",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": "cpython",
        "platform": f"{sys.platform}/amd64",
    }


def _refuse(rt: ResourceType, name: str, causes: list[Cause]) -> NoReturn:
    """A 422 Invalid naming each field and rule, as kube-apiserver words it."""
    detail = ", ".join(f"{c.field}: {c.message}" for c in causes)
    summary = f"[{detail}]" if len(causes) > 1 else detail
    raise Invalid(
        f'{rt.qualified_kind} "{name}" is invalid: {summary}',
        causes=causes,
        details={"name": name, "group": rt.group, "kind": rt.kind},
    )


def _path(request: Request) -> str:
    """The request's path, decoded, as the server received it (the ASGI scope's ``path``).
    Starlette's ``request.url`` builds and re-splits the whole URL first, 2% of a submission's
    CPU (issue 30), and would cut a decoded ``?`` out of the path."""
    path: str = request.scope["path"]
    return path


def _json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        fastjson.dumps(body),
        status_code=status,
        media_type=_JSON,
        headers=dict(headers or {}),
    )


def _error_response(error: ApiError) -> Response:
    return _json_response(error.to_status(), error.code)


async def _drain_unread(request: Request) -> None:
    """Drop the body of a request answered without reading it (401, 404, 415...): see
    :func:`fleet.apiserver.bodies.drain`. Not when the client waits for ``100 Continue``."""
    if (
        request.method in ("GET", "HEAD")
        or request.scope.get("fleet.body_read")
        or request.headers.get("expect", "").lower() == "100-continue"
    ):
        return
    request.scope["fleet.body_read"] = True
    with contextlib.suppress(Exception):  # consumed already, or the client went away
        await bodies.drain(request.stream(), request.headers.get("content-length"))


async def _only_shown(
    events: AsyncIterator[WatchEvent], shown: Callable[[Obj], bool]
) -> AsyncIterator[WatchEvent]:
    """The watch events whose object may be shown (bookmarks and errors always)."""
    try:
        async for event in events:
            if event.type in (ERROR, BOOKMARK) or shown(event.object):
                yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True)
class _Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "apiserver_requests", "Requests served", ["verb", "resource", "code"], registry=self.registry
        )
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Time to the response's start",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.watchers = Gauge(
            "apiserver_open_watches", "Open watch streams", ["resource"], registry=self.registry
        )


class _Api:
    """The request handlers, bound to one registry and store."""

    def __init__(
        self,
        *,
        registry: Registry,
        store: Store,
        authenticator: Authenticator | None,
        authorizer: Authorizer | None,
        version_info: Obj,
        bookmark_interval: float,
        title: str,
        user_info: reviews.UserInfo,
        visibility: Visibility | None,
        subresources: Mapping[str, SubresourceHandler],
        paths: reviews.PathCheck,
        fresh_wait: float,
    ) -> None:
        self.subresources = dict(subresources)
        self.paths = paths
        self.fresh_wait = fresh_wait
        self.user_info = user_info
        self.visibility = visibility
        self.registry = registry
        self.store = store
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.version_info = version_info
        self.bookmark_interval = bookmark_interval
        self.title = title
        self.metrics = _Metrics()
        self.hub = StreamHub()

    # --- plumbing ------------------------------------------------------------------------------

    def endpoint(
        self, handler: Callable[[Request], Awaitable[Response]], *, public: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a handler with authentication, error rendering, metrics and the request log line."""

        async def wrapped(request: Request) -> Response:
            started = time.perf_counter()
            user = "-"
            try:
                if self.authenticator is not None and not public:
                    who = self.authenticator(request.headers)
                    if who is None:
                        raise Unauthorized("Unauthorized")
                    user = who
                    request.scope["fleet.user"] = who
                response = await handler(request)
            except ApiError as error:
                response = _error_response(error)
            except Exception:
                log.exception("event=unhandled method=%s path=%s", request.method, _path(request))
                response = _json_response(
                    status_object(500, "InternalError", "an internal error occurred; see the server log"), 500
                )
            await _drain_unread(request)
            elapsed = time.perf_counter() - started
            resource = request.scope.get("fleet.resource", "-")
            verb = request.scope.get("fleet.verb", request.method.lower())
            self.metrics.requests.labels(verb, resource, str(response.status_code)).inc()
            self.metrics.latency.labels(verb, resource).observe(elapsed)
            code = response.status_code
            level = logging.DEBUG if code < 400 or code in _QUIET_CODES else logging.WARNING
            if log.isEnabledFor(level):
                log.log(
                    level,
                    "event=request method=%s path=%s verb=%s resource=%s code=%d user=%s ms=%.1f",
                    request.method,
                    _path(request),
                    verb,
                    resource,
                    code,
                    user,
                    elapsed * 1000,
                )
            return response

        return wrapped

    @staticmethod
    async def _raw_body(request: Request) -> bytes:
        """The request body, read once, and only up to the size limit (else 413)."""
        raw = request.scope.get("fleet.body")
        if raw is None:
            request.scope["fleet.body_read"] = True
            raw = await bodies.read_limited(
                request.stream(),
                request.headers.get("content-length"),
                expects_continue=request.headers.get("expect", "").lower() == "100-continue",
            )
            request.scope["fleet.body"] = raw
        return bytes(raw)

    async def _body(self, request: Request) -> Any:
        """The decoded body: bounded in size, depth and YAML aliasing (:mod:`~fleet.apiserver.bodies`)."""
        raw = await self._raw_body(request)
        if not raw:
            raise BadRequest("the request body is empty")
        content_type = request.headers.get("content-type", _JSON).split(";")[0].strip()
        if content_type == protobuf.CONTENT_TYPE:
            try:  # kubectl's typed create of a built-in kind
                return protobuf.decode(raw)
            except protobuf.ProtobufError as error:
                raise UnsupportedMediaType(
                    f"the body of the request was in an unknown format: {error} - "
                    f"accepted media types include: {', '.join(sorted(_BODY_TYPES))}"
                ) from None
        if content_type not in _BODY_TYPES:
            raise UnsupportedMediaType(
                f'the body of the request was in an unknown format: "{content_type}" - '
                f"accepted media types include: {', '.join(sorted(_BODY_TYPES))}"
            )
        return bodies.decode(raw, content_type)

    def _target(self, request: Request) -> _Target:
        """Resolve ``/api/v1/...`` or ``/apis/<g>/<v>/...`` to a kind, namespace, name, subresource."""
        parts = [p for p in _path(request).split("/") if p]
        if len(parts) < (3 if parts[0] == "api" else 4):
            raise NotFound("the server could not find the requested resource")
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt = self.registry.get(group, version, rest[2])
            if rt is None and self.registry.get(group, version, "namespaces") is None:
                self.registry.lookup(group, version, rest[2])  # the 404 naming what is not served
            if rt is not None and rt.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise NotFound("the server could not find the requested resource")
        rt = self.registry.lookup(group, version, rest[0])
        if rt.storage_version:
            # Another served version of the kind: stored, validated and kept at the storage
            # version; what comes in is converted to it, what goes out back (_incoming, _out).
            request.scope["fleet.served"] = rt
            rt = self.registry.lookup(group, rt.storage_version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        served = (subresource == "status" and rt.has_status) or (
            subresource in self.subresources and rt.subresource(str(subresource)) is not None
        )
        if subresource is not None and not served:
            raise NotFound(f"the server could not find the requested resource ({rt.qualified}/{subresource})")
        request.scope["fleet.resource"] = rt.plural
        return _Target(rt, namespace, name, subresource)

    @staticmethod
    def _dry_run(request: Request) -> bool:
        values = request.query_params.getlist("dryRun")
        for value in values:
            if value != "All":
                raise BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return bool(values)

    @staticmethod
    def _int_param(request: Request, name: str) -> int | None:
        value = request.query_params.get(name)
        if value in (None, ""):
            return None
        try:
            return int(value)
        except ValueError:
            raise BadRequest(f"{name}: {value!r} is not an integer") from None

    @staticmethod
    def _flag(request: Request, name: str) -> bool:
        return request.query_params.get(name, "").lower() in ("1", "true")

    # --- object admission ----------------------------------------------------------------------

    def _incoming(self, request: Request, rt: ResourceType, obj: Any) -> Obj:
        """A body sent at the request's version, at the storage version: an object of a served
        version that is not the storage one is converted (``apiVersion``, then the version's
        ``to_storage``), then checked as :meth:`_check_type` checks every body."""
        served: ResourceType | None = request.scope.get("fleet.served")
        if served is not None and isinstance(obj, dict):
            checked = self._check_type(served, obj)
            checked["apiVersion"] = rt.api_version
            if served.to_storage is not None:
                served.to_storage(checked)
            return checked
        return self._check_type(rt, obj)

    @staticmethod
    def _out(request: Request, obj: Obj) -> Obj:
        """``obj`` at the version the request asked for (the ``None`` conversion strategy)."""
        served: ResourceType | None = request.scope.get("fleet.served")
        if served is None or obj.get("kind") != served.kind or obj.get("apiVersion") == served.api_version:
            return obj
        return {**obj, "apiVersion": served.api_version}

    def _check_type(self, rt: ResourceType, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise BadRequest(f"the request body must be a JSON object ({rt.kind})")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version not in (None, "", rt.api_version):
            raise BadRequest(
                f"the API version in the data ({api_version}) does not match "
                f"the expected API version ({rt.api_version})"
            )
        if kind not in (None, "", rt.kind):
            raise BadRequest(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = {}
        elif not isinstance(meta, dict):
            raise BadRequest("metadata: must be an object")
        return obj

    @staticmethod
    def _directive(request: Request) -> str:
        """The request's ``fieldValidation`` (:func:`fleet.apiserver.fields.directive`)."""
        return fields.directive(request.query_params.get("fieldValidation"))

    async def _decoded_fields(self, rt: ResourceType, obj: Obj, request: Request) -> list[str]:
        """Unknown and duplicate fields of a created or replaced object, under the request's
        ``fieldValidation`` (:mod:`~fleet.apiserver.fields`): refused (400), or dropped with the
        warnings returned, or dropped silently."""
        mode = self._directive(request)
        content_type = request.headers.get("content-type", _JSON).split(";")[0].strip()
        duplicates: list[str] = []
        yaml_lines: list[str] = []
        if mode != fields.IGNORE and content_type != protobuf.CONTENT_TYPE:
            duplicates, yaml_lines = fields.body_findings(await self._raw_body(request), content_type)
        found = fields.object_findings(
            rt, obj, duplicates, body_order=content_type not in bodies.YAML_TYPES, yaml_lines=yaml_lines
        )
        return fields.settle(rt, found, mode)

    @staticmethod
    def _warn(response: Response, texts: list[str]) -> Response:
        for text in texts:
            response.headers.append("Warning", fields.warning_header(text))
        return response

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        probe = obj
        if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
            # The store appends five characters (``generate_name``): validate a name that long.
            probe = {**obj, "metadata": {**meta, "name": meta["generateName"] + "xxxxx"}}
        causes = validate_metadata(probe, namespaced=rt.namespaced)
        typed = schema_causes(rt.schema, obj) if rt.schema is not None else []
        if typed:  # the kind's own rules assume its schema holds
            causes += typed
        elif rt.validate is not None:
            specific = rt.validate(obj)
            # A kind's own rule for a field (a Namespace name is a label) replaces the generic one.
            overridden = {cause.field for cause in specific}
            causes = [cause for cause in causes if cause.field not in overridden] + specific
        if causes:
            _refuse(rt, meta.get("name") or meta.get("generateName") or "", causes)

    def _scope(self, target: _Target, obj: Obj) -> None:
        """The URL decides namespace and name; a body that disagrees is a BadRequest."""
        meta = obj["metadata"]
        rt = target.rt
        if rt.namespaced:
            if target.namespace is None:
                raise MethodNotAllowed(f"{rt.plural} are namespaced: use /namespaces/<namespace>/{rt.plural}")
            if meta.get("namespace") not in (None, "", target.namespace):
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = target.namespace
        elif meta.get("namespace"):
            meta.pop("namespace")
        if target.name is not None and meta.get("name") not in (None, "", target.name):
            raise BadRequest(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({target.name})"
            )
        if target.name is not None:
            meta["name"] = target.name

    # --- verbs ---------------------------------------------------------------------------------

    async def resource(self, request: Request) -> Response:
        target = self._target(request)
        method = request.method
        verb: str | None = None
        if target.name is None:
            if method == "GET":
                verb = "watch" if self._flag(request, "watch") else "list"
            elif method == "POST":
                verb = "create"
            elif method == "DELETE" and "deletecollection" in target.rt.verbs:
                verb = "deletecollection"
        elif self._answered(target):
            verb = {"GET": "get", "POST": "create"}.get(method)
        elif method in _ITEM_VERBS and not (target.subresource and method == "DELETE"):
            verb = _ITEM_VERBS[method]
        if verb is None:
            raise MethodNotAllowed(
                f"the server does not allow this method on the requested resource ({method})"
            )
        request.scope["fleet.verb"] = verb
        user = str(request.scope.get("fleet.user") or "system:anonymous")
        if reviews.is_review(target.rt):
            return await self.review(request, target, verb, user)
        applying = verb == "patch" and request.headers.get("content-type", "").startswith(ssa.APPLY_PATCH)
        if self.authorizer is not None and not applying:  # an apply is authorized once it knows its verb
            self.authorizer(Access(user, verb, target.rt, target.namespace, target.name, target.subresource))
        if self._answered(target):
            return await self.answer(request, target, verb, user)
        if target.subresource is None and verb in _BODY_VERBS and verb not in target.rt.verbs:
            # Answered before the body is read: a kind that has no such verb refuses it whatever
            # the body says (kubectl's typed clients send protobuf, which only reviews decode).
            # Other verbs reach the kind's store, whose refusal says more.
            read_only = set(target.rt.verbs) <= {"get", "list", "watch"}
            raise MethodNotAllowed(
                f"{target.rt.qualified} is read-only: {verb} is not supported"
                if read_only
                else f"{target.rt.qualified} does not support {verb}"
            )
        handlers: dict[str, Callable[[Request, _Target], Awaitable[Response]]] = {
            "watch": self.watch,
            "list": self.list,
            "create": self.create,
            "deletecollection": self.delete_collection,
            "get": self.get,
            "update": self.update,
            "patch": self.patch,
            "delete": self.delete,
        }
        return await handlers[verb](request, target)

    def _answered(self, target: _Target) -> bool:
        """Whether the target is a subresource a handler answers (not ``status``)."""
        return target.subresource is not None and target.subresource in self.subresources

    async def answer(self, request: Request, target: _Target, verb: str, user: str) -> Response:
        """A subresource a handler answers: ``create`` decodes, checks and validates the object
        sent exactly as a create of the parent kind does (``fieldValidation``, the kind's schema,
        its metadata rules) before the handler sees it; ``get`` hands over the name only."""
        rt = target.rt
        assert target.subresource is not None and target.name is not None
        sub = rt.subresource(target.subresource)
        if sub is None or verb not in sub.verbs:
            raise MethodNotAllowed(
                f"the server does not allow this method on the requested resource ({request.method})"
            )
        body: Obj | None = None
        warnings: list[str] = []
        if verb == "create":
            body = self._incoming(request, rt, await self._body(request))
            self._scope(target, body)
            warnings = await self._decoded_fields(rt, body, request)
            if rt.has_status and not rt.status_on_create:
                body.pop("status", None)
            if rt.prepare_create is not None:
                rt.prepare_create(body)
            self._validate(rt, body)
        access = Access(user, verb, rt, target.namespace, target.name, target.subresource)
        answered = await self.subresources[target.subresource](access, body)
        return self._warn(_json_response(answered, 201 if verb == "create" else 200), warnings)

    def _allowed(self, access: Access) -> bool:
        """What the authorizer decides for this access, as a yes or no (for the reviews)."""
        if self.authorizer is None:
            return True
        try:
            self.authorizer(access)
        except Forbidden:
            return False
        return True

    async def review(self, request: Request, target: _Target, verb: str, user: str) -> Response:
        """A self review (:mod:`~fleet.apiserver.reviews`): answered, never stored; any
        authenticated user may ask about itself."""
        if verb != "create" or target.name is not None:
            raise MethodNotAllowed(
                f"the server does not allow this method on the requested resource ({request.method})"
            )
        body = await self._body(request)  # kubectl's typed clients send protobuf
        warnings: list[str] = []
        if isinstance(body, dict):
            warnings = await self._decoded_fields(target.rt, body, request)
        if target.rt.schema is not None and isinstance(body, dict):
            causes = schema_causes(target.rt.schema, body)
            if causes:
                meta = body.get("metadata")
                _refuse(target.rt, str(meta.get("name") or "") if isinstance(meta, dict) else "", causes)
        answered = reviews.answer(
            target.rt,
            body,
            user=user,
            registry=self.registry,
            allowed=self._allowed,
            user_info=self.user_info,
            paths=self.paths,
        )
        return self._warn(_json_response(answered, 201), warnings)

    def _render(self, request: Request, rt: ResourceType, obj: Obj, status: int = 200) -> Response:
        obj = self._out(request, obj)
        if wants_table(request.headers.get("accept", "")):
            rv = obj.get("metadata", {}).get("resourceVersion", "")
            include = request.query_params.get("includeObject", "Metadata")
            return _json_response(build_table(rt, [obj], include_object=include, resource_version=rv), status)
        return _json_response(obj, status)

    def _shown(self, request: Request, target: _Target) -> Callable[[Obj], bool] | None:
        """The visibility test of this list or watch, or ``None`` when everything is shown."""
        visibility = self.visibility
        if visibility is None:
            return None
        user = str(request.scope.get("fleet.user") or "system:anonymous")
        access = Access(user, str(request.scope.get("fleet.verb")), target.rt, target.namespace, None, None)
        return lambda obj: visibility(access, obj)

    async def get(self, request: Request, target: _Target) -> Response:
        assert target.name is not None
        obj = await self.store.get(target.rt, target.namespace, target.name)
        return self._render(request, target.rt, obj)

    async def list(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        continue_token = request.query_params.get("continue") or None
        wanted = request.query_params.get("resourceVersion")
        # A list "not older than" a version the store has not reached waits for it, then is
        # answered 504 (too_large), as kube-apiserver's watch cache answers one.
        at_least = None
        if not continue_token and wanted not in (None, "", "0"):
            at_least = parse_resource_version(str(wanted))
        deadline = time.monotonic() + self.fresh_wait
        while True:
            items, rv, token = await self.store.list(
                rt,
                target.namespace,
                label_selector=request.query_params.get("labelSelector"),
                field_selector=request.query_params.get("fieldSelector"),
                limit=self._int_param(request, "limit"),
                continue_token=continue_token,
            )
            if at_least is None or not str(rv).isdigit() or int(rv) >= at_least:
                break
            if time.monotonic() >= deadline:
                raise too_large(at_least, int(rv))
            await asyncio.sleep(0.2)
        shown = self._shown(request, target)
        if shown is not None:
            items = [item for item in items if shown(item)]
        served: ResourceType | None = request.scope.get("fleet.served")
        if served is not None:
            items = [self._out(request, item) for item in items]
            rt = replace(rt, version=served.version)
        if wants_table(request.headers.get("accept", "")):
            include = request.query_params.get("includeObject", "Metadata")
            return _json_response(
                build_table(rt, items, include_object=include, resource_version=rv, continue_token=token)
            )
        metadata: Obj = {"resourceVersion": rv}
        if token:
            metadata["continue"] = token
        return _json_response(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": metadata, "items": items}
        )

    async def create(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        obj = self._incoming(request, rt, await self._body(request))
        self._scope(target, obj)
        warnings = await self._decoded_fields(rt, obj, request)
        if rt.has_status and not rt.status_on_create:
            obj.pop("status", None)
        if rt.prepare_create is not None:
            rt.prepare_create(obj)
        self._validate(rt, obj)
        ssa.record_update(None, obj, manager=self._manager(request), api_version=rt.api_version)
        created = await self.store.create(rt, obj, dry_run=self._dry_run(request))
        return self._warn(self._render(request, rt, created, 201), warnings)

    @staticmethod
    def _manager(request: Request) -> str:
        """The field manager of a write: ``fieldManager``, else the client's name."""
        return request.query_params.get("fieldManager") or ssa.default_manager(
            request.headers.get("user-agent", "")
        )

    async def update(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        obj = self._incoming(request, rt, await self._body(request))
        self._scope(target, obj)
        warnings = await self._decoded_fields(rt, obj, request)
        if rt.prepare_update is not None:
            rt.prepare_update(obj)
        self._validate(rt, obj)
        assert target.name is not None
        with contextlib.suppress(NotFound):  # the store answers a missing object itself
            current = await self.store.get(rt, target.namespace, target.name)
            if not rt.unconditional_update and not obj["metadata"].get("resourceVersion"):
                # After the 404 of a missing object, as kube-apiserver's generic store
                # (``Store.Update``) answers a custom resource's PUT without a version: a replace
                # of a file read earlier must not overwrite what was written since (``kubectl
                # replace -f`` of the file a job was created from).
                unset = "Invalid value: 0x0: must be specified for an update"
                _refuse(rt, target.name, [Cause("metadata.resourceVersion", unset)])
            ssa.record_update(
                current,
                obj,
                manager=self._manager(request),
                api_version=rt.api_version,
                with_status=target.subresource is not None,
            )
        updated = await self.store.update(
            rt, obj, subresource=target.subresource, dry_run=self._dry_run(request)
        )
        return self._warn(self._render(request, rt, updated), warnings)

    async def patch(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        assert target.name is not None
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        accepted = [_JSON_PATCH, _MERGE_PATCH] + ([_STRATEGIC_PATCH] if rt.strategic is not None else [])
        accepted.append(ssa.APPLY_PATCH)
        if content_type == ssa.APPLY_PATCH:
            return await self.server_side_apply(request, target)
        if content_type not in accepted:
            raise UnsupportedMediaType(
                "the body of the request was in an unknown format - "
                f"accepted media types include: {', '.join(accepted)}"
            )
        mode = self._directive(request)
        patch = await self._body(request)
        # The patch's own findings (fieldValidation Strict or Warn): its repeated keys, or a
        # JSON patch's operations decoded strictly.
        own: list[str] = []
        if mode != fields.IGNORE:
            raw = await self._raw_body(request)
            if content_type == _JSON_PATCH:
                own = fields.json_patch_findings(raw)
            else:
                own = [f'duplicate field "{path}"' for path in fields.json_duplicates(raw)]
        dry_run = self._dry_run(request)
        deadline = time.monotonic() + _PATCH_RETRY_SECONDS
        current = await self.store.get(rt, target.namespace, target.name)
        while True:
            read_version = str(current["metadata"]["resourceVersion"])
            seen = self._out(request, current)  # a patch applies to the object at its version
            if content_type == _JSON_PATCH:
                patched = apply_json_patch(seen, patch)
            elif content_type == _MERGE_PATCH:
                patched = apply_merge_patch(seen, patch)
            else:
                assert rt.strategic is not None
                patched = apply_strategic_merge_patch(seen, patch, rt.strategic)
            bodies.check_object(patched, "the patched object")
            obj = self._incoming(request, rt, patched)
            shown = ""
            if mode == fields.STRICT:  # what the refusal shows, as it was before pruning
                shown = (
                    fields.go_value(fields.shown(rt, patch))
                    if content_type == _STRATEGIC_PATCH
                    else json.dumps(fields.shown(rt, obj), sort_keys=True, separators=(",", ":"))
                )
            found = own + fields.patch_findings(rt, obj, current)
            if found and mode == fields.STRICT:
                raise fields.refuse_patch(shown, found)
            warnings = fields.warnings(found) if mode == fields.WARN else []
            self._scope(target, obj)
            meta = obj["metadata"]
            if not meta.get("resourceVersion"):
                meta["resourceVersion"] = read_version
            if rt.prepare_update is not None:
                rt.prepare_update(obj)
            self._validate(rt, obj)
            ssa.record_update(
                current,
                obj,
                manager=self._manager(request),
                api_version=rt.api_version,
                with_status=target.subresource is not None,
            )
            try:
                updated = await self.store.update(rt, obj, subresource=target.subresource, dry_run=dry_run)
            except Conflict:
                # As the API server's GuaranteedUpdate: a patch with no opinion on the version (the
                # patched object kept the version it was applied to) is applied again to the object
                # as it now is, when it changed meanwhile; a patch that names another version, or a
                # conflict that is not a newer object (a backend's own refusal), is answered.
                if str(meta["resourceVersion"]) != read_version or time.monotonic() > deadline:
                    raise
                current = await self.store.get(rt, target.namespace, target.name)
                if str(current["metadata"]["resourceVersion"]) == read_version:
                    raise
                continue
            return self._warn(self._render(request, rt, updated), warnings)

    def _authorize_apply(self, request: Request, target: _Target, verb: str) -> None:
        if self.authorizer is not None:
            user = str(request.scope.get("fleet.user") or "system:anonymous")
            self.authorizer(Access(user, verb, target.rt, target.namespace, target.name, target.subresource))

    async def server_side_apply(self, request: Request, target: _Target) -> Response:
        """``PATCH`` with ``application/apply-patch+yaml`` (:mod:`~fleet.apiserver.apply`):
        creates the object when it is missing; an apply that changes nothing is not written."""
        rt = target.rt
        assert target.name is not None
        manager = request.query_params.get("fieldManager", "")
        force = self._flag(request, "force")
        dry_run = self._dry_run(request)
        mode = self._directive(request)
        raw = await self._raw_body(request)
        if not raw.strip():
            raise BadRequest("the request body is empty")
        config = self._incoming(request, rt, bodies.decode(raw, "application/yaml"))
        self._scope(target, config)
        status = target.subresource is not None
        deadline = time.monotonic() + _PATCH_RETRY_SECONDS
        while True:
            try:
                current: Obj | None = await self.store.get(rt, target.namespace, target.name)
            except NotFound:
                if status:
                    raise
                current = None
            # Creating by apply is a create; applying to an existing object needs what a get
            # needs (a conflict shows no more than a get would), and a patch only if it changes
            # the object: re-applying the same file is a no-op any reader may make (GitOps tools
            # apply on every sync).
            self._authorize_apply(request, target, "create" if current is None else "get")
            # A field the kind does not declare is refused whatever fieldValidation says, before
            # anything is merged; the body's repeated keys after (fleet.apiserver.fields).
            fields.check_applied(rt, config, target.namespace, target.name)
            obj = ssa.apply(
                current, config, manager=manager, force=force, api_version=rt.api_version, with_status=status
            )
            warnings = fields.applied_duplicates(raw, mode)
            bodies.check_object(obj, "the applied object")
            fields.patch_findings(rt, obj, current)  # nothing new is unknown: this drops the nulls
            if current is None:
                if rt.has_status and not rt.status_on_create:
                    obj.pop("status", None)
                if rt.prepare_create is not None:
                    rt.prepare_create(obj)
                self._validate(rt, obj)
                created = await self.store.create(rt, obj, dry_run=dry_run)
                return self._warn(self._render(request, rt, created, 201), warnings)
            if ssa.same_object(obj, current):
                return self._warn(self._render(request, rt, current), warnings)
            self._authorize_apply(request, target, "patch")
            self._validate(rt, obj)
            read_version = str(current["metadata"]["resourceVersion"])
            obj["metadata"]["resourceVersion"] = read_version
            try:
                updated = await self.store.update(rt, obj, subresource=target.subresource, dry_run=dry_run)
            except Conflict:
                if time.monotonic() > deadline:
                    raise
                continue  # someone wrote in between: apply again to the object as it is now
            return self._warn(self._render(request, rt, updated), warnings)

    async def _delete_options(self, request: Request) -> Obj:
        """The optional ``DeleteOptions`` body (kubectl sends ``dryRun`` and preconditions there)."""
        raw = await self._raw_body(request)
        if not raw.strip():
            return {}
        options = await self._body(request)
        if not isinstance(options, dict):
            raise BadRequest("the request body must be a DeleteOptions object")
        for value in options.get("dryRun") or []:
            if value != "All":
                raise BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return options

    async def delete(self, request: Request, target: _Target) -> Response:
        assert target.name is not None
        rt = target.rt
        options = await self._delete_options(request)
        dry_run = self._dry_run(request) or bool(options.get("dryRun"))
        preconditions = options.get("preconditions") or {}
        if preconditions:
            current = await self.store.get(rt, target.namespace, target.name)
            meta = current["metadata"]
            for field in ("uid", "resourceVersion"):
                wanted = preconditions.get(field)
                if wanted and wanted != meta.get(field):
                    raise Conflict(
                        f"Precondition failed: {field} in precondition: {wanted}, {field} in object meta: "
                        f"{meta.get(field)}",
                        details={"name": target.name, "group": rt.group, "kind": rt.plural},
                    )
        deleted = await self.store.delete(rt, target.namespace, target.name, dry_run=dry_run)
        return _json_response(self._out(request, deleted))

    async def delete_collection(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        options = await self._delete_options(request)
        dry_run = self._dry_run(request) or bool(options.get("dryRun"))
        items, rv, _ = await self.store.list(
            rt,
            target.namespace,
            label_selector=request.query_params.get("labelSelector"),
            field_selector=request.query_params.get("fieldSelector"),
        )
        deleted = []
        for item in items:
            meta = item["metadata"]
            with contextlib.suppress(NotFound):
                deleted.append(
                    await self.store.delete(rt, meta.get("namespace"), meta["name"], dry_run=dry_run)
                )
        return _json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": rv},
                "items": deleted,
            }
        )

    # --- watch ---------------------------------------------------------------------------------

    async def watch(self, request: Request, target: _Target) -> Response:
        rt = target.rt
        labels = request.query_params.get("labelSelector")
        fields = request.query_params.get("fieldSelector")
        LabelSelector.parse(labels)  # a bad selector is a 400 before the stream starts
        FieldSelector.parse(fields, rt.supported_field_selectors)
        timeout = self._int_param(request, "timeoutSeconds")
        seconds = float(timeout) if timeout and timeout > 0 else _MAX_WATCH_SECONDS
        bookmarks = self.bookmark_interval if self._flag(request, "allowWatchBookmarks") else None
        table = wants_table(request.headers.get("accept", ""))
        include = request.query_params.get("includeObject", "Metadata")
        if table:
            build_table(rt, [], include_object=include)  # checks includeObject up front
        events = self.store.watch(
            rt,
            target.namespace,
            resource_version=request.query_params.get("resourceVersion") or None,
            label_selector=labels,
            field_selector=fields,
            bookmark_interval=bookmarks,
        )
        shown = self._shown(request, target)
        if shown is not None:
            events = _only_shown(events, shown)

        def line(event: WatchEvent, first: bool) -> bytes:
            obj = self._out(request, event.object)
            if table and event.type not in (ERROR, BOOKMARK):
                rv = obj.get("metadata", {}).get("resourceVersion", "")
                obj = build_table(rt, [obj], include_object=include, resource_version=rv, with_columns=first)
            return fastjson.dumps({"type": event.type, "object": obj}) + b"\n"

        return StreamingResponse(self._stream(rt, events, seconds, line), media_type=_JSON)

    async def _stream(
        self,
        rt: ResourceType,
        events: AsyncIterator[WatchEvent],
        seconds: float,
        line: Callable[[WatchEvent, bool], bytes],
    ) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        closing: asyncio.Future[Any] = asyncio.ensure_future(self.hub.closing.wait())
        pending: asyncio.Future[Any] | None = None
        first = True
        self.metrics.watchers.labels(rt.plural).inc()
        self.hub.open += 1
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(events.__anext__())
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                done, _ = await asyncio.wait(
                    {pending, closing}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                if pending not in done:
                    return  # timeoutSeconds reached or the listener is stopping
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return
                except ApiError as error:
                    yield line(WatchEvent(ERROR, error.to_status()), first)
                    return
                pending = None
                chunk = [line(event, first)]
                first = False
                # Send what else is ready now in the same chunk: a writer's burst (one operator
                # pass, one Lua script's changes) becomes one socket write, not one per event.
                while len(chunk) < _WATCH_BATCH:
                    pending = asyncio.ensure_future(events.__anext__())
                    await asyncio.sleep(0)  # one step for it: done now if an event was queued
                    if not pending.done():
                        break
                    try:
                        event = pending.result()
                    except StopAsyncIteration:
                        yield b"".join(chunk)
                        return
                    except ApiError as error:
                        chunk.append(line(WatchEvent(ERROR, error.to_status()), False))
                        yield b"".join(chunk)
                        return
                    pending = None
                    chunk.append(line(event, False))
                yield b"".join(chunk)
        finally:
            self.hub.open -= 1
            self.metrics.watchers.labels(rt.plural).dec()
            closing.cancel()
            if pending is not None and not pending.done():
                # cancel_and_wait, not one cancel: a cancellation lost in a Redis call would
                # leave this stream waiting for the store's next change, past timeoutSeconds.
                # This stream's own cancellation (the server stopping) is taken here too, so
                # that the store's watch below is still closed on the loop it runs on.
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, ApiError):
                    await cancel_and_wait(pending)
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    # --- discovery, health, metrics ------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        return _json_response(self.version_info)

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def metrics_endpoint(self, request: Request) -> Response:
        """The app's Prometheus registry, to a user granted the path (``paths``), as Kubernetes
        serves ``/metrics`` only to a ``nonResourceURLs`` grant: 403 otherwise."""
        user = str(request.scope.get("fleet.user") or "system:anonymous")
        if self.authenticator is not None and not self.paths(user, "get", "/metrics"):
            raise Forbidden(f'forbidden: User "{user}" cannot get path "/metrics"')
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def api_root(self, request: Request) -> Response:
        request.scope["fleet.resource"] = "discovery"
        address = (
            f"{request.url.hostname}:{request.url.port}" if request.url.port else str(request.url.hostname)
        )
        return _json_response(discovery.api_versions(address))

    async def apis_root(self, request: Request) -> Response:
        request.scope["fleet.resource"] = "discovery"
        return _json_response(discovery.api_group_list(self.registry))

    async def api_tree(self, request: Request) -> Response:
        """Everything under ``/api/`` and ``/apis/``: discovery documents or resources."""
        parts = [p for p in _path(request).split("/") if p]
        if request.method == "GET":
            found: Obj | None = None
            if len(parts) == 1:  # "/api/" and "/apis/", as the Python client asks
                return await (self.api_root(request) if parts[0] == "api" else self.apis_root(request))
            if parts[0] == "api" and len(parts) == 2:
                found = discovery.api_resource_list(self.registry, "", parts[1])
            elif parts[0] == "apis" and len(parts) == 2:
                found = discovery.api_group(self.registry, parts[1])
            elif parts[0] == "apis" and len(parts) == 3:
                found = discovery.api_resource_list(self.registry, parts[1], parts[2])
            else:
                return await self.resource(request)
            request.scope["fleet.resource"] = "discovery"
            if found is None:
                raise NotFound("the server could not find the requested resource")
            return _json_response(found)
        if (parts[0] == "api" and len(parts) < 3) or (parts[0] == "apis" and len(parts) < 4):
            raise MethodNotAllowed(
                f"the server does not allow this method on the requested resource ({request.method})"
            )
        return await self.resource(request)

    async def openapi_v2(self, request: Request) -> Response:
        version = str(self.version_info.get("gitVersion", "v1"))
        if "protobuf" in request.headers.get("accept", ""):
            return Response(
                discovery.openapi_v2_protobuf(self.title, version), media_type=discovery.OPENAPI_V2_PROTOBUF
            )
        return _json_response(discovery.openapi_v2_json(self.title, version, self.registry))

    async def openapi_v3(self, request: Request) -> Response:
        return _json_response(discovery.openapi_v3_index(self.registry, self.title))

    async def openapi_v3_gv(self, request: Request) -> Response:
        parts = [p for p in request.path_params["path"].split("/") if p]
        document: Obj | None = None
        if len(parts) == 2 and parts[0] == "api":
            document = discovery.openapi_v3_document(self.registry, "", parts[1], self.title)
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.openapi_v3_document(self.registry, parts[1], parts[2], self.title)
        if document is None:
            raise NotFound("the server could not find the requested resource")
        return _json_response(document)


def build_app(
    registry: Registry,
    store: Store,
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    version_info: Obj | None = None,
    bookmark_interval: float = _DEFAULT_BOOKMARK_INTERVAL,
    title: str = "fleet",
    user_info: reviews.UserInfo = reviews.anonymous_info,
    visibility: Visibility | None = None,
    subresources: Mapping[str, SubresourceHandler] | None = None,
    paths: reviews.PathCheck = reviews.no_path_grants,
    fresh_wait: float = FRESH_WAIT_SECONDS,
) -> Starlette:
    """A Kubernetes-compatible API for ``registry``'s kinds over ``store``.

    ``authenticator`` names the user of each request (``None`` answers 401); ``authorizer``
    then sees every resource request as an :class:`Access` and may refuse it with ``Forbidden``
    (discovery and OpenAPI need authentication only, ``/metrics`` a user ``paths`` grants it to
    (:data:`~fleet.apiserver.reviews.GUARDED_PATHS`); the health probes neither).
    ``app.state.api_hub`` is the :class:`StreamHub` of its watch streams (``serve.Server`` ends
    them when it stops); ``app.state.metrics_registry`` its Prometheus registry, also at ``/metrics``.
    The review kinds of :mod:`~fleet.apiserver.reviews`, when ``registry`` serves them, are
    answered from ``authorizer`` (``user_info`` says who a user is, for ``kubectl auth whoami``).
    ``visibility`` hides listed and watched objects a requester may not see. ``subresources``
    answers, by name, the subresources the kinds declare (:attr:`ResourceType.subresources`); a
    declared one without a handler is not served (404). ``fresh_wait``: how long a list from a
    version the store has not reached waits for it before its 504 (the store's watches have
    their own).
    """
    api = _Api(
        registry=registry,
        store=store,
        authenticator=authenticator,
        authorizer=authorizer,
        version_info=version_info or default_version_info(),
        bookmark_interval=bookmark_interval,
        title=title,
        user_info=user_info,
        visibility=visibility,
        subresources=subresources or {},
        paths=paths,
        fresh_wait=fresh_wait,
    )
    every = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes = [
        Route("/version", api.endpoint(api.version, public=True), methods=["GET"]),
        Route("/healthz", api.endpoint(api.health, public=True), methods=["GET"]),
        Route("/livez", api.endpoint(api.health, public=True), methods=["GET"]),
        Route("/readyz", api.endpoint(api.health, public=True), methods=["GET"]),
        Route("/metrics", api.endpoint(api.metrics_endpoint), methods=["GET"]),
        Route("/api", api.endpoint(api.api_root), methods=["GET"]),
        Route("/apis", api.endpoint(api.apis_root), methods=["GET"]),
        Route("/api/{path:path}", api.endpoint(api.api_tree), methods=every),
        Route("/apis/{path:path}", api.endpoint(api.api_tree), methods=every),
        Route("/openapi/v2", api.endpoint(api.openapi_v2), methods=["GET"]),
        Route("/openapi/v3", api.endpoint(api.openapi_v3), methods=["GET"]),
        Route("/openapi/v3/{path:path}", api.endpoint(api.openapi_v3_gv), methods=["GET"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        await _drain_unread(request)
        return _error_response(NotFound("the server could not find the requested resource"))

    async def not_allowed(request: Request, exc: Exception) -> Response:
        await _drain_unread(request)
        return _error_response(MethodNotAllowed(f"the server does not allow this method ({request.method})"))

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    app.state.api_hub = api.hub
    app.state.metrics_registry = api.metrics.registry
    app.state.store = store
    app.state.registry = registry
    return app
