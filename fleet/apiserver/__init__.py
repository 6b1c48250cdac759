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

from typing import TYPE_CHECKING, Final

from fleet.lazy_face import lazy_face

if TYPE_CHECKING:
    from fleet.apiserver.app import (
        Access,
        Authenticator,
        StreamHub,
        SubresourceHandler,
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
        Timeout,
        Unauthorized,
        UnsupportedMediaType,
    )
    from fleet.apiserver.fields import warning_header
    from fleet.apiserver.kubetypes import definitions as kube_definitions
    from fleet.apiserver.kubetypes import is_model as is_kube_model
    from fleet.apiserver.memory import MemoryStore
    from fleet.apiserver.patch import MergeRule
    from fleet.apiserver.pods import validate_pod_template
    from fleet.apiserver.resources import Obj, PrinterColumn, Registry, ResourceType, Subresource
    from fleet.apiserver.reviews import PathCheck, anonymous_info, no_path_grants, with_reviews
    from fleet.apiserver.selectors import field_value
    from fleet.apiserver.serve import Server, serve
    from fleet.apiserver.store import (
        ADDED,
        BOOKMARK,
        DELETED,
        ERROR,
        FRESH_WAIT_SECONDS,
        MODIFIED,
        Memory,
        ObjectFilter,
        Page,
        Store,
        WatchEvent,
        already_exists,
        bookmark,
        check_subresource,
        clone,
        conflict,
        content_digest,
        decode_continue,
        deletion,
        expired_continue,
        new_object,
        not_found,
        parse_resource_version,
        select_page,
        selector_view,
        too_large,
        too_old,
        update_target,
        updated_object,
        version_reached,
        write_type,
    )
    from fleet.apiserver.tables import json_path, since
    from fleet.apiserver.validation import (
        DNS1035_LABEL_MAX_LENGTH,
        dns1035_label,
        dns1123_label,
        invalid,
        label_value,
        required,
    )

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    "Access": ("fleet.apiserver.app", "Access"),
    "Authenticator": ("fleet.apiserver.app", "Authenticator"),
    "StreamHub": ("fleet.apiserver.app", "StreamHub"),
    "SubresourceHandler": ("fleet.apiserver.app", "SubresourceHandler"),
    "TokenAuthenticator": ("fleet.apiserver.app", "TokenAuthenticator"),
    "build_app": ("fleet.apiserver.app", "build_app"),
    "default_version_info": ("fleet.apiserver.app", "default_version_info"),
    "COMPANION_KINDS": ("fleet.apiserver.companion_kinds", "COMPANION_KINDS"),
    "CONFIGMAP": ("fleet.apiserver.companion_kinds", "CONFIGMAP"),
    "SECRET": ("fleet.apiserver.companion_kinds", "SECRET"),
    "SERVICE": ("fleet.apiserver.companion_kinds", "SERVICE"),
    "EVENT": ("fleet.apiserver.core_kinds", "EVENT"),
    "NAMESPACE": ("fleet.apiserver.core_kinds", "NAMESPACE"),
    "NODE": ("fleet.apiserver.core_kinds", "NODE"),
    "POD": ("fleet.apiserver.core_kinds", "POD"),
    "AlreadyExists": ("fleet.apiserver.errors", "AlreadyExists"),
    "ApiError": ("fleet.apiserver.errors", "ApiError"),
    "BadRequest": ("fleet.apiserver.errors", "BadRequest"),
    "Cause": ("fleet.apiserver.errors", "Cause"),
    "Conflict": ("fleet.apiserver.errors", "Conflict"),
    "Forbidden": ("fleet.apiserver.errors", "Forbidden"),
    "Gone": ("fleet.apiserver.errors", "Gone"),
    "Invalid": ("fleet.apiserver.errors", "Invalid"),
    "MethodNotAllowed": ("fleet.apiserver.errors", "MethodNotAllowed"),
    "NotFound": ("fleet.apiserver.errors", "NotFound"),
    "RequestEntityTooLarge": ("fleet.apiserver.errors", "RequestEntityTooLarge"),
    "Unauthorized": ("fleet.apiserver.errors", "Unauthorized"),
    "UnsupportedMediaType": ("fleet.apiserver.errors", "UnsupportedMediaType"),
    "warning_header": ("fleet.apiserver.fields", "warning_header"),
    "kube_definitions": ("fleet.apiserver.kubetypes", "definitions"),
    "is_kube_model": ("fleet.apiserver.kubetypes", "is_model"),
    "MemoryStore": ("fleet.apiserver.memory", "MemoryStore"),
    "MergeRule": ("fleet.apiserver.patch", "MergeRule"),
    "validate_pod_template": ("fleet.apiserver.pods", "validate_pod_template"),
    "Obj": ("fleet.apiserver.resources", "Obj"),
    "PrinterColumn": ("fleet.apiserver.resources", "PrinterColumn"),
    "Registry": ("fleet.apiserver.resources", "Registry"),
    "ResourceType": ("fleet.apiserver.resources", "ResourceType"),
    "Subresource": ("fleet.apiserver.resources", "Subresource"),
    "anonymous_info": ("fleet.apiserver.reviews", "anonymous_info"),
    "with_reviews": ("fleet.apiserver.reviews", "with_reviews"),
    "field_value": ("fleet.apiserver.selectors", "field_value"),
    "Server": ("fleet.apiserver.serve", "Server"),
    "serve": ("fleet.apiserver.serve", "serve"),
    "ADDED": ("fleet.apiserver.store", "ADDED"),
    "BOOKMARK": ("fleet.apiserver.store", "BOOKMARK"),
    "DELETED": ("fleet.apiserver.store", "DELETED"),
    "ERROR": ("fleet.apiserver.store", "ERROR"),
    "MODIFIED": ("fleet.apiserver.store", "MODIFIED"),
    "ObjectFilter": ("fleet.apiserver.store", "ObjectFilter"),
    "Page": ("fleet.apiserver.store", "Page"),
    "Store": ("fleet.apiserver.store", "Store"),
    "WatchEvent": ("fleet.apiserver.store", "WatchEvent"),
    "already_exists": ("fleet.apiserver.store", "already_exists"),
    "bookmark": ("fleet.apiserver.store", "bookmark"),
    "check_subresource": ("fleet.apiserver.store", "check_subresource"),
    "clone": ("fleet.apiserver.store", "clone"),
    "content_digest": ("fleet.apiserver.store", "content_digest"),
    "Memory": ("fleet.apiserver.store", "Memory"),
    "conflict": ("fleet.apiserver.store", "conflict"),
    "decode_continue": ("fleet.apiserver.store", "decode_continue"),
    "deletion": ("fleet.apiserver.store", "deletion"),
    "expired_continue": ("fleet.apiserver.store", "expired_continue"),
    "new_object": ("fleet.apiserver.store", "new_object"),
    "not_found": ("fleet.apiserver.store", "not_found"),
    "parse_resource_version": ("fleet.apiserver.store", "parse_resource_version"),
    "select_page": ("fleet.apiserver.store", "select_page"),
    "selector_view": ("fleet.apiserver.store", "selector_view"),
    "too_old": ("fleet.apiserver.store", "too_old"),
    "update_target": ("fleet.apiserver.store", "update_target"),
    "updated_object": ("fleet.apiserver.store", "updated_object"),
    "write_type": ("fleet.apiserver.store", "write_type"),
    "json_path": ("fleet.apiserver.tables", "json_path"),
    "since": ("fleet.apiserver.tables", "since"),
    "DNS1035_LABEL_MAX_LENGTH": ("fleet.apiserver.validation", "DNS1035_LABEL_MAX_LENGTH"),
    "dns1035_label": ("fleet.apiserver.validation", "dns1035_label"),
    "invalid": ("fleet.apiserver.validation", "invalid"),
    "label_value": ("fleet.apiserver.validation", "label_value"),
    "required": ("fleet.apiserver.validation", "required"),
    "Timeout": ("fleet.apiserver.errors", "Timeout"),
    "PathCheck": ("fleet.apiserver.reviews", "PathCheck"),
    "no_path_grants": ("fleet.apiserver.reviews", "no_path_grants"),
    "FRESH_WAIT_SECONDS": ("fleet.apiserver.store", "FRESH_WAIT_SECONDS"),
    "too_large": ("fleet.apiserver.store", "too_large"),
    "version_reached": ("fleet.apiserver.store", "version_reached"),
    "dns1123_label": ("fleet.apiserver.validation", "dns1123_label"),
}


lazy_face(__name__, _FACE)


__all__ = [
    "ADDED",
    "BOOKMARK",
    "COMPANION_KINDS",
    "CONFIGMAP",
    "DELETED",
    "DNS1035_LABEL_MAX_LENGTH",
    "ERROR",
    "EVENT",
    "FRESH_WAIT_SECONDS",
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
    "Memory",
    "MemoryStore",
    "MergeRule",
    "MethodNotAllowed",
    "NotFound",
    "Obj",
    "ObjectFilter",
    "Page",
    "PathCheck",
    "PrinterColumn",
    "Registry",
    "RequestEntityTooLarge",
    "ResourceType",
    "Server",
    "Store",
    "StreamHub",
    "Subresource",
    "SubresourceHandler",
    "Timeout",
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
    "content_digest",
    "decode_continue",
    "default_version_info",
    "deletion",
    "dns1035_label",
    "dns1123_label",
    "expired_continue",
    "field_value",
    "invalid",
    "is_kube_model",
    "json_path",
    "kube_definitions",
    "label_value",
    "new_object",
    "no_path_grants",
    "not_found",
    "parse_resource_version",
    "required",
    "select_page",
    "selector_view",
    "serve",
    "since",
    "too_large",
    "too_old",
    "update_target",
    "updated_object",
    "validate_pod_template",
    "version_reached",
    "warning_header",
    "with_reviews",
    "write_type",
]
