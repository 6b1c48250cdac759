"""The Kubernetes-compatible serving core: one reusable layer for simulated members and the fleet API.

Fleet's members are Kubernetes API servers, and Fleet's own endpoint speaks the Kubernetes API too,
so kubectl and the official ``kubernetes`` client work against both unchanged. This package is the
layer both are built on. It is generic: it knows nothing of NPUs or queues, only kinds and storage.

Design, module by module:

``resources``
    :class:`ResourceType` describes a served kind: names for discovery (plural, singular, short
    names), scope, printer columns or a computed ``table_row``, the ``status`` subresource,
    strictness, a ``validate`` hook, supported field selectors and strategic-merge keys. A
    :class:`Registry` holds the kinds of one endpoint.
``core_kinds``
    The core/v1 kinds: Namespace, Node, Pod, Event (the simulated members serve them with the
    job kinds, :func:`fleet.sim.member_registry`).
``store``, ``memory``
    The :class:`Store` protocol (async get/list/create/update/delete/watch) and the semantics
    every store shares (``store``), and the in-memory :class:`MemoryStore` (``memory``). Storage
    owns what must be atomic: one resourceVersion sequence, optimistic concurrency (409),
    server-set metadata, the status split, finalizers, and watch with a bounded history (410
    Gone beyond it). The fleet's Redis store (:mod:`fleet.state`) calls the same semantics.
    Trusted in-process writers (the simulator's controllers) call the store directly on the
    server's loop and watch it cheaply.
``app``
    :func:`build_app`: the Starlette app. Request policy lives here: decoding, unknown and
    duplicate fields as ``fieldValidation`` says (``fields``, pruning by the kind's ``schema``),
    create-time defaulting (status reset, Namespace and Pod phases), validation with field causes,
    dry run, the three patch types (retried on conflict unless they name a resourceVersion, as
    the API server's ``GuaranteedUpdate``), Table output, watch streaming
    with bookmarks and ``timeoutSeconds``, errors as ``Status``, one log line per request,
    Prometheus metrics at ``/metrics``.
``bodies``
    One home for the limits on request bodies, as the Kubernetes API server sets them where
    Python allows: 3 MiB for every content type (413), 100 levels of nesting (400), YAML aliases
    counted as go-yaml counts them, JSON patches of at most 10000 operations copying 3 MiB.
``serve``
    :class:`Server`: uvicorn in the running loop, started and stopped at will on a fixed port.
``schema``, ``kubetypes``, ``fields``
    A kind's schema (validation, pruning, OpenAPI); Kubernetes' own types as schema parts, from
    the official client's models; what ``fieldValidation`` makes of unknown and repeated fields.
``patch``, ``selectors``, ``tables``, ``discovery``, ``validation``, ``errors``
    JSON/merge/strategic patches; label and field selectors; Tables and ages; discovery and
    OpenAPI documents; metadata validation; the ``Status`` errors.

Compatibility targets, checked by the tests with the real tools: the ``kubernetes`` Python client
(CRUD, conflicts, selectors, paging, watch resumption, 410) and kubectl 1.32 (discovery falls
back to the legacy format; ``--validate`` is left to the server, whose OpenAPI v3 documents say
it validates fields; ``get`` prints server-side Tables).

The rest of Fleet imports what it uses of this layer from here (``__all__``), never from its
modules (the ``apiserver-face`` contract in ``pyproject.toml``), so the modules can be split or
renamed behind the face.
"""

from fleet.apiserver.app import (
    Access,
    Authenticator,
    StreamHub,
    TokenAuthenticator,
    build_app,
    default_version_info,
)
from fleet.apiserver.companion_kinds import COMPANION_KINDS, CONFIGMAP, SECRET, SERVICE
from fleet.apiserver.core_kinds import EVENT, NAMESPACE, NODE, POD
from fleet.apiserver.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Cause,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from fleet.apiserver.fields import warning_header
from fleet.apiserver.kubetypes import definitions as kube_definitions
from fleet.apiserver.kubetypes import is_model as is_kube_model
from fleet.apiserver.memory import MemoryStore
from fleet.apiserver.patch import MergeRule
from fleet.apiserver.pods import validate_pod_template
from fleet.apiserver.resources import Obj, PrinterColumn, Registry, ResourceType
from fleet.apiserver.reviews import anonymous_info, with_reviews
from fleet.apiserver.selectors import field_value
from fleet.apiserver.serve import Server, serve
from fleet.apiserver.store import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    MODIFIED,
    ObjectFilter,
    Page,
    Store,
    WatchEvent,
    already_exists,
    bookmark,
    check_subresource,
    clone,
    conflict,
    decode_continue,
    deletion,
    expired_continue,
    new_object,
    not_found,
    parse_resource_version,
    select_page,
    selector_view,
    too_old,
    update_target,
    updated_object,
    write_type,
)
from fleet.apiserver.tables import json_path, since
from fleet.apiserver.validation import DNS1035_LABEL_MAX_LENGTH, dns1035_label, invalid, label_value, required

__all__ = [
    "ADDED",
    "BOOKMARK",
    "COMPANION_KINDS",
    "CONFIGMAP",
    "DELETED",
    "DNS1035_LABEL_MAX_LENGTH",
    "ERROR",
    "EVENT",
    "MODIFIED",
    "NAMESPACE",
    "NODE",
    "POD",
    "SECRET",
    "SERVICE",
    "Access",
    "AlreadyExists",
    "ApiError",
    "Authenticator",
    "BadRequest",
    "Cause",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MemoryStore",
    "MergeRule",
    "MethodNotAllowed",
    "NotFound",
    "Obj",
    "ObjectFilter",
    "Page",
    "PrinterColumn",
    "Registry",
    "RequestEntityTooLarge",
    "ResourceType",
    "Server",
    "Store",
    "StreamHub",
    "TokenAuthenticator",
    "Unauthorized",
    "UnsupportedMediaType",
    "WatchEvent",
    "already_exists",
    "anonymous_info",
    "bookmark",
    "build_app",
    "check_subresource",
    "clone",
    "conflict",
    "decode_continue",
    "default_version_info",
    "deletion",
    "dns1035_label",
    "expired_continue",
    "field_value",
    "invalid",
    "is_kube_model",
    "json_path",
    "kube_definitions",
    "label_value",
    "new_object",
    "not_found",
    "parse_resource_version",
    "required",
    "select_page",
    "selector_view",
    "serve",
    "since",
    "too_old",
    "update_target",
    "updated_object",
    "validate_pod_template",
    "warning_header",
    "with_reviews",
    "write_type",
]
