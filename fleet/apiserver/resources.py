"""What a served kind is: :class:`ResourceType`, and the :class:`Registry` that looks them up.

A resource type holds everything the generic handlers need to serve a kind the way Kubernetes
does: its names for discovery (plural, singular, short names), scope, the columns of its Table,
whether it has a ``status`` subresource, how strictly it decodes, its validation, which field
selectors it supports and, for core kinds, the merge keys of strategic merge patch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.apiserver.errors import Cause, NotFound
from fleet.apiserver.patch import MergeRule

__all__ = [
    "BASE_FIELD_SELECTORS",
    "Access",
    "Obj",
    "PrinterColumn",
    "Registry",
    "ResourceType",
    "Subresource",
    "TableRow",
    "Validator",
]

Obj = dict[str, Any]
#: Validation: field causes for an object about to be stored (empty when valid).
Validator = Callable[[Obj], list[Cause]]
#: Computed cells of one Table row, one per printer column, for kinds whose columns need logic.
TableRow = Callable[[Obj], list[Any]]

#: Field selectors every kind supports, as in Kubernetes.
BASE_FIELD_SELECTORS: tuple[str, ...] = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class PrinterColumn:
    """A Table column. ``path`` is JSONPath-ish (``.status.conditions[-1].type``)."""

    name: str
    type: str = "string"
    path: str = ""
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Subresource:
    """A subresource beyond ``status`` whose answer the app's owner computes (a handler given to
    :func:`~fleet.apiserver.app.build_app`), in the manner of ``serviceaccounts/token`` or
    ``deployments/scale``: ``POST`` sends an object of the parent kind and ``GET`` asks about the
    stored one; the answer is an object of its own kind (``group/version``, ``kind``)."""

    name: str
    kind: str
    group: str
    version: str
    verbs: tuple[str, ...] = ("create", "get")


@dataclass(frozen=True)
class ResourceType:
    """One served kind. ``group`` is ``""`` for the core group."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    list_kind: str = ""
    printer_columns: tuple[PrinterColumn, ...] = ()
    has_status: bool = False
    strict: bool = True
    validate: Validator | None = None
    table_row: TableRow | None = None
    #: Field selectors beyond ``metadata.name``/``metadata.namespace`` (``spec.nodeName``...).
    field_selectors: tuple[str, ...] = ()
    #: Strategic merge patch rules by dotted path; ``None``: the kind takes no strategic patch
    #: (like a custom resource, which Kubernetes answers with 415).
    strategic: Mapping[str, MergeRule] | None = field(default=None, compare=False, hash=False)
    #: Top-level fields a strict kind accepts besides apiVersion, kind and metadata.
    top_level: tuple[str, ...] = ("spec", "status")
    #: Defaulting applied to objects created through the API (Namespace phase, Pod phase...).
    prepare_create: Callable[[Obj], None] | None = None
    #: Conversion applied to every object updated or patched through the API (a Secret's
    #: ``stringData`` folded into ``data``), before validation.
    prepare_update: Callable[[Obj], None] | None = None
    #: Keep ``status`` sent on create through the API (Kubernetes does so for Node only).
    status_on_create: bool = False
    #: Set on a kind's other served version (kube-apiserver's CRD with several ``versions``):
    #: the version its objects are stored at. Objects sent at this version are converted to the
    #: storage version (``apiVersion``, then :attr:`to_storage`) and read back at the version
    #: asked for (``apiVersion`` only: the ``None`` conversion strategy).
    storage_version: str = ""
    #: What converting an object sent at this version to the storage version changes beyond
    #: ``apiVersion`` (fields the storage version spells elsewhere); ``None``: nothing.
    to_storage: Callable[[Obj], None] | None = field(default=None, compare=False, hash=False)
    categories: tuple[str, ...] = ()
    #: What the kind is, for ``kubectl explain``.
    description: str = ""
    #: The JSON Schema of the kind's own fields (:mod:`fleet.apiserver.schema`): validates its
    #: objects and is its OpenAPI, so ``kubectl explain`` works at every depth. ``None``: an
    #: open schema naming the top-level fields only.
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    verbs: tuple[str, ...] = field(
        default=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    )
    #: Subresources beyond ``status`` (their answers come from handlers given to ``build_app``).
    subresources: tuple[Subresource, ...] = ()

    def __post_init__(self) -> None:
        if not self.list_kind:
            object.__setattr__(self, "list_kind", f"{self.kind}List")

    @property
    def unconditional_update(self) -> bool:
        """Whether an update (PUT) may leave out ``metadata.resourceVersion`` and overwrite the
        object as it is (the registry strategy's ``AllowUnconditionalUpdate``). Kubernetes allows
        it for most built-in kinds and never for custom resources (their strategy answers false:
        ``apiextensions-apiserver``'s ``customResourceStrategy``), whose PUT without a version is
        422 ``metadata.resourceVersion: Invalid value: 0x0: must be specified for an update``.
        Here a kind is custom exactly when it takes no strategic merge patch (:attr:`strategic`),
        as Kubernetes decides for those too."""
        return self.strategic is not None

    @property
    def api_version(self) -> str:
        """``v1`` for core, ``group/version`` otherwise: what objects carry as ``apiVersion``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage identity of the kind: (group, plural)."""
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``ascendjobs.mindxdl.gitee.com`` or ``pods``: how Status messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``AscendJob.mindxdl.gitee.com`` or ``Pod``: how Invalid messages name the kind."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def builtin(self) -> bool:
        """Whether the kind is one of Kubernetes' own, decoded into a Go type (it takes strategic
        merge patches), rather than a custom resource decoded by its schema; the two report
        unknown fields in different orders (:mod:`~fleet.apiserver.fields`)."""
        return self.strategic is not None

    def subresource(self, name: str) -> Subresource | None:
        """The subresource ``name`` of :attr:`subresources`, if the kind has it."""
        return next((s for s in self.subresources if s.name == name), None)

    @property
    def supported_field_selectors(self) -> tuple[str, ...]:
        return BASE_FIELD_SELECTORS + self.field_selectors


@dataclass(frozen=True)
class Access:
    """What a resource request asks to do, as an authorizer sees it (after authentication).

    ``verb`` is the Kubernetes verb (get, list, watch, create, update, patch, delete,
    deletecollection); ``namespace`` is ``None`` for a cluster-scoped kind or a request across
    all namespaces; ``subresource`` is ``"status"``, one of the kind's :attr:`ResourceType.subresources`,
    or ``None``.
    """

    user: str
    verb: str
    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class Registry:
    """The kinds one endpoint serves, looked up by group/version/plural."""

    def __init__(self, types: Iterable[ResourceType] = (), *, describe_unserved: bool = False) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        #: Whether the 404 of an unknown resource names it and lists :meth:`served_kinds` (the
        #: fleet endpoint's, for clients that post without discovery); else kube-apiserver's words.
        self.describe_unserved = describe_unserved
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        path = (rt.group, rt.version, rt.plural)
        if path in self._by_path:
            raise ValueError(f"resource {rt.qualified} version {rt.version} is registered twice")
        self._by_path[path] = rt

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._by_path.values())

    def __len__(self) -> int:
        return len(self._by_path)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType:
        """The type served at this path, or the ``NotFound`` the API answers for an unknown one."""
        rt = self.get(group, version, plural)
        if rt is None:
            message = "the server could not find the requested resource"
            if self.describe_unserved:
                where = f"{plural}.{group}/{version}" if group else f"{plural} in {version}"
                message += f" ({where} is not served here; it serves {', '.join(self.served_kinds())})"
            raise NotFound(message)
        return rt

    def served_kinds(self) -> list[str]:
        """``Kind (apiVersion)`` of every kind a client can create and list here, in order."""
        return [
            f"{rt.kind} ({rt.api_version})"
            for rt in self._by_path.values()
            if "create" in rt.verbs and "list" in rt.verbs
        ]

    def groups(self) -> dict[str, list[str]]:
        """Served versions per group, in registration order (core is ``""``)."""
        out: dict[str, list[str]] = {}
        for group, version, _ in self._by_path:
            versions = out.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._by_path.items() if g == group and v == version]
