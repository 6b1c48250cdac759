"""The calls Fleet makes on one member cluster, through the official ``kubernetes`` client.

Objects come back as plain JSON dicts, exactly as the member sent them: jobs are custom
objects anyway, and the syncers and placement read nodes and pods by their JSON field names, so
skipping the client's model classes keeps one shape everywhere and saves their cost on large
lists. Every call goes through :class:`~fleet.members.retry.Caller` (timeouts, retries, typed
errors, metrics).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from kubernetes.client.exceptions import ApiException

from fleet import fastjson
from fleet.members.errors import Conflict, MemberError, MemberRefused, NotFound, safe_message
from fleet.members.guard import Bulkhead, CircuitBreaker
from fleet.members.resource import (
    CONFIGMAPS,
    NAMESPACES,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    JSONObject,
    Listing,
    Resource,
)
from fleet.members.rest import Rest
from fleet.members.retry import Caller
from fleet.members.settings import MemberSettings
from fleet.members.watch import BatchCallback, EventCallback, Watcher

if TYPE_CHECKING:
    from kubernetes.client import ApiClient
    from urllib3 import BaseHTTPResponse


__all__ = ["Member", "Probe", "safe_server"]

log = logging.getLogger("fleet.members")


@dataclass(frozen=True)
class Probe:
    """One health probe: ``error`` says what went wrong when not ``healthy``, fit for a status
    message (no address: :func:`~fleet.members.errors.safe_message`); ``detail`` says it all,
    for the log only."""

    healthy: bool
    seconds: float
    error: str | None = None
    detail: str | None = None


def safe_server(url: str) -> str:
    """The server URL without any ``user:password@`` part, fit for logs and reprs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _read_json(response: Any) -> JSONObject:
    # ``_preload_content=False`` makes the client return the raw urllib3 response, whatever its
    # annotations say.
    try:
        data = response.data
    finally:
        response.release_conn()
    parsed = fastjson.loads(data) if data else {}
    if not isinstance(parsed, dict):
        raise ValueError("member answered with JSON that is not an object")
    return parsed


def _require_name(field: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field}: must be a non-empty string, got {value!r}")
    return value


#: The companion kinds a member is asked to hold, by kind.
_COMPANIONS = {r.kind: r for r in (CONFIGMAPS, SECRETS, SERVICES)}


def _companion(kind: str) -> Resource:
    try:
        return _COMPANIONS[kind]
    except KeyError:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(_COMPANIONS)}") from None


def _operation(verb: str, resource: Resource) -> str:
    """The call's name in metrics and logs (``create_configmap``)."""
    return f"{verb}_{resource.kind.lower()}"


def _namespace_missing(error: NotFound, namespace: str) -> bool:
    details = error.details
    if details.get("kind") == "namespaces" and details.get("name") == namespace:
        return True
    return f'namespaces "{namespace}" not found' in error.message


class Member:
    """One member cluster: its name, its ``ApiClient``, its settings and the calls Fleet makes.

    Thread-safe: the client's connection pool is shared by the dispatcher's, workers' and
    watchers' threads. Neither ``repr`` nor any log line shows credentials.
    """

    def __init__(self, name: str, api_client: ApiClient, settings: MemberSettings | None = None) -> None:
        self.name = _require_name("member name", name)
        self.api_client = api_client
        self.settings = settings or MemberSettings()
        self.server = safe_server(str(api_client.configuration.host))
        self._call = Caller(self.name, self.settings)
        self._rest = Rest(api_client)
        self._namespaces: set[str] = set()
        self._watchers: list[Watcher] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Member(name={self.name!r}, server={self.server!r})"

    @property
    def breaker(self) -> CircuitBreaker:
        """The member's circuit breaker in this process (:mod:`fleet.members.guard`)."""
        return self._call.breaker

    @property
    def bulkhead(self) -> Bulkhead:
        return self._call.bulkhead

    def close(self) -> None:
        """Stop the watchers made by :meth:`watch` and release the member's pooled connections."""
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher.stop()
        self.api_client.close()  # type: ignore[no-untyped-call]

    @property
    def _timeout(self) -> tuple[float, float]:
        return (self.settings.connect_timeout, self.settings.request_timeout)

    # -- namespaces ---------------------------------------------------------------------------

    def ensure_namespace(self, namespace: str) -> None:
        """Make sure ``namespace`` exists in the member (created when absent; cached once seen)."""
        _require_name("namespace", namespace)
        with self._lock:
            if namespace in self._namespaces:
                return
        try:
            self._call(
                "get_namespace",
                lambda: _read_json(self._rest.get(NAMESPACES, None, namespace, timeout=self._timeout)),
            )
        except NotFound:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            try:
                self._call(
                    "create_namespace",
                    lambda: _read_json(self._rest.create(NAMESPACES, None, body, timeout=self._timeout)),
                )
                log.info("member=%s kind=namespace event=created namespace=%s", self.name, namespace)
            except Conflict:
                pass  # created meanwhile by someone else: what we wanted
        with self._lock:
            self._namespaces.add(namespace)

    # -- jobs (any custom kind: ``kind`` says which) --------------------------------------------

    def create_job(self, kind: Resource, namespace: str, body: Mapping[str, Any]) -> JSONObject:
        """Create a job of ``kind`` in ``namespace`` (creating the namespace first if needed).

        Raises :class:`Conflict` (reason ``AlreadyExists``) when a job of that name exists, also
        when an earlier attempt of this very call was applied but its answer lost: the caller
        adopts its own copy by the labels that name the fleet job.
        """
        payload = self._job_body(kind, namespace, body)
        self.ensure_namespace(namespace)
        try:
            return self._create_job(kind, namespace, payload)
        except NotFound as error:
            if not _namespace_missing(error, namespace):
                raise
            # Deleted since we cached it: create it again and try once more.
            with self._lock:
                self._namespaces.discard(namespace)
            self.ensure_namespace(namespace)
            return self._create_job(kind, namespace, payload)

    def _create_job(self, kind: Resource, namespace: str, payload: JSONObject) -> JSONObject:
        return self._call(
            "create_job",
            lambda: _read_json(self._rest.create(kind, namespace, payload, timeout=self._timeout)),
        )

    @staticmethod
    def _job_body(kind: Resource, namespace: str, body: Mapping[str, Any]) -> JSONObject:
        _require_name("namespace", namespace)
        if not isinstance(body, Mapping):
            raise ValueError(f"body: must be a mapping (a {kind.kind} object), got {type(body).__name__}")
        payload = dict(body)
        metadata = payload.get("metadata")
        if not isinstance(metadata, Mapping):
            raise ValueError("body.metadata: must be a mapping with a name")
        if not metadata.get("name") and not metadata.get("generateName"):
            raise ValueError("body.metadata.name: required (or metadata.generateName)")
        body_namespace = metadata.get("namespace")
        if body_namespace not in (None, namespace):
            raise ValueError(
                f"body.metadata.namespace: {body_namespace!r} differs from namespace {namespace!r}"
            )
        for field, expected in (("apiVersion", kind.api_version), ("kind", kind.kind)):
            value = payload.setdefault(field, expected)
            if value != expected:
                raise ValueError(f"body.{field}: must be {expected!r}, got {value!r}")
        return payload

    # -- companion objects (ConfigMap, Secret, Service) -----------------------------------------

    def get_core(self, kind: str, namespace: str, name: str) -> JSONObject:
        """A ConfigMap, Secret or Service, or :class:`NotFound`."""
        companion = _companion(kind)
        _require_name("namespace", namespace)
        _require_name("name", name)
        return self._call(
            _operation("get", companion),
            lambda: _read_json(self._rest.get(companion, namespace, name, timeout=self._timeout)),
        )

    def create_core(self, namespace: str, body: Mapping[str, Any]) -> JSONObject:
        """Create a ConfigMap, Secret or Service (its namespace first if needed); :class:`Conflict`
        when one of that name exists. Logs name the object, never its data."""
        companion = _companion(str(body.get("kind")))
        self.ensure_namespace(namespace)
        payload = dict(body)
        created = self._call(
            _operation("create", companion),
            lambda: _read_json(self._rest.create(companion, namespace, payload, timeout=self._timeout)),
        )
        log.info(
            "member=%s kind=%s event=created namespace=%s name=%s",
            self.name,
            companion.kind.lower(),
            namespace,
            (body.get("metadata") or {}).get("name"),
        )
        return created

    def replace_core(self, namespace: str, body: Mapping[str, Any]) -> JSONObject:
        """Replace a ConfigMap, Secret or Service (``metadata.resourceVersion`` guards it)."""
        companion = _companion(str(body.get("kind")))
        name = _require_name("name", (body.get("metadata") or {}).get("name"))
        payload = dict(body)
        replaced = self._call(
            _operation("replace", companion),
            lambda: _read_json(
                self._rest.replace(companion, namespace, name, payload, timeout=self._timeout)
            ),
        )
        log.info(
            "member=%s kind=%s event=replaced namespace=%s name=%s",
            self.name,
            companion.kind.lower(),
            namespace,
            name,
        )
        return replaced

    def delete_core(self, kind: str, namespace: str, name: str) -> bool:
        """Delete a ConfigMap, Secret or Service; ``False`` when it was already absent."""
        companion = _companion(kind)
        _require_name("namespace", namespace)
        _require_name("name", name)
        try:
            self._call(
                _operation("delete", companion),
                lambda: _read_json(self._rest.delete(companion, namespace, name, timeout=self._timeout)),
            )
        except NotFound:
            return False
        log.info(
            "member=%s kind=%s event=deleted namespace=%s name=%s",
            self.name,
            companion.kind.lower(),
            namespace,
            name,
        )
        return True

    def get_job(self, kind: Resource, namespace: str, name: str) -> JSONObject:
        """The job of ``kind``, or :class:`NotFound`."""
        _require_name("namespace", namespace)
        _require_name("name", name)
        return self._call(
            "get_job",
            lambda: _read_json(self._rest.get(kind, namespace, name, timeout=self._timeout)),
        )

    def delete_job(self, kind: Resource, namespace: str, name: str, *, uid: str | None = None) -> bool:
        """Delete the job of ``kind``; ``False`` when it was already absent (deleting is idempotent).

        With ``uid``, only that very copy is deleted: a newer job of the same name (another
        attempt) makes the member answer :class:`Conflict` instead, so purging a stale copy can
        never remove its successor.
        """
        _require_name("namespace", namespace)
        _require_name("name", name)
        options: JSONObject = {"propagationPolicy": "Background"}
        if uid is not None:
            options["preconditions"] = {"uid": _require_name("uid", uid)}
        try:
            self._call(
                "delete_job",
                lambda: _read_json(
                    self._rest.delete(kind, namespace, name, body=options, timeout=self._timeout)
                ),
            )
        except NotFound:
            return False
        return True

    def list_jobs(
        self, kind: Resource, label_selector: str | None = None, *, namespace: str | None = None
    ) -> list[JSONObject]:
        """Jobs of ``kind`` matching ``label_selector``, in one namespace or all."""
        return self.list_objects(kind, label_selector=label_selector, namespace=namespace).items

    # -- nodes and pods -----------------------------------------------------------------------

    def list_nodes(self, label_selector: str | None = None) -> list[JSONObject]:
        return self.list_objects(NODES, label_selector=label_selector).items

    def list_pods(
        self,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        namespace: str | None = None,
    ) -> list[JSONObject]:
        return self.list_objects(
            PODS, label_selector=label_selector, field_selector=field_selector, namespace=namespace
        ).items

    # -- generic list and watch (used by Watcher) ---------------------------------------------

    @staticmethod
    def _listable(resource: Resource, namespace: str | None) -> None:
        """Refuse a list Fleet never makes (the member ClusterRole grants no other)."""
        if namespace is not None:
            _require_name("namespace", namespace)
            if not resource.namespaced:
                raise ValueError(f"namespace: {resource.name} are cluster-scoped, pass no namespace")
        if not resource.custom and resource not in (NODES, PODS):
            raise ValueError(f"resource: {resource.name!r} is not one Fleet lists (a job kind, nodes, pods)")

    def list_objects(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
        retry: bool = True,
    ) -> Listing:
        """All objects of ``resource`` (paged by ``page_size``) and the list's resourceVersion.

        A continue token that expires mid-way (410) restarts the list, since the pages must come
        from one snapshot for the resourceVersion to be a safe place to watch from. ``retry=False``
        makes one attempt per page (a watcher paces its own retries so that it can stop at once).
        """
        self._listable(resource, namespace)
        operation = f"list_{resource.name}"
        for _restart in range(3):
            items: list[JSONObject] = []
            resource_version = ""
            token: str | None = None
            try:
                while True:
                    page = self._call(
                        operation,
                        partial(self._page, resource, namespace, label_selector, field_selector, token),
                        retry=retry,
                    )
                    items.extend(page.get("items") or [])
                    metadata = page.get("metadata") or {}
                    resource_version = resource_version or str(metadata.get("resourceVersion") or "")
                    token = metadata.get("continue") or None
                    if token is None:
                        return Listing(items, resource_version)
            except MemberRefused as error:
                if error.code != 410 or token is None:
                    raise
                log.info(
                    "member=%s kind=%s event=list-restart reason=continue-expired", self.name, resource.name
                )
        raise MemberRefused(
            self.name, operation, 410, "Expired", "continue token kept expiring; list restarted 3 times"
        )

    def _page(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        token: str | None,
    ) -> JSONObject:
        query = [
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
            ("limit", self.settings.page_size),
            ("continue", token),
        ]
        return _read_json(self._rest.list(resource, namespace, query=query, timeout=self._timeout))

    def open_watch(
        self,
        resource: Resource,
        resource_version: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
    ) -> BaseHTTPResponse:
        """Open a watch stream from ``resource_version`` (one attempt: the watcher paces retries).

        The caller reads JSON lines from the returned response and must close it. The server ends
        the stream after ``watch_timeout_seconds``; a read blocked longer than
        ``watch_read_timeout`` fails, so a dead connection is noticed.
        """
        self._listable(resource, namespace)
        query = [
            ("watch", True),
            ("allowWatchBookmarks", True),
            ("resourceVersion", resource_version or None),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
            ("timeoutSeconds", self.settings.watch_timeout_seconds),
        ]
        response: BaseHTTPResponse = self._call(
            f"watch_{resource.name}",
            lambda: self._rest.list(
                resource,
                namespace,
                query=query,
                timeout=(self.settings.connect_timeout, self.settings.watch_read_timeout),
            ),
            retry=False,
        )
        return response

    def watch(
        self,
        resource: Resource,
        callback: EventCallback,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
        start: bool = True,
        on_batch: BatchCallback | None = None,
    ) -> Watcher:
        """A :class:`~fleet.members.watch.Watcher` of ``resource`` delivering to ``callback``
        (and the changes of each read together to ``on_batch``, when given)."""
        watcher = Watcher(
            self,
            resource,
            callback,
            label_selector=label_selector,
            field_selector=field_selector,
            namespace=namespace,
            on_batch=on_batch,
        )
        with self._lock:
            self._watchers = [w for w in self._watchers if not w.stopped]
            self._watchers.append(watcher)
        if start:
            watcher.start()
        return watcher

    def watch_jobs(
        self,
        kind: Resource,
        callback: EventCallback,
        label_selector: str | None = None,
        *,
        on_batch: BatchCallback | None = None,
    ) -> Watcher:
        return self.watch(kind, callback, label_selector=label_selector, on_batch=on_batch)

    # -- health -------------------------------------------------------------------------------

    def probe(self) -> Probe:
        """One ``GET /readyz`` with the short probe timeout and no retry (thresholds are the caller's)."""
        timeout = self.settings.probe_timeout
        start = time.perf_counter()

        def readyz() -> bytes:
            request = self.api_client.param_serialize(
                method="GET", resource_path="/readyz", auth_settings=["BearerToken"]
            )
            response = self.api_client.call_api(*request, _request_timeout=(timeout, timeout))
            data = response.read()  # type: ignore[no-untyped-call]
            if not 200 <= response.status <= 299:
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            return bytes(data or b"")

        try:
            self._call("probe", readyz, retry=False)
        except MemberError as error:
            return Probe(False, time.perf_counter() - start, safe_message(error), str(error))
        return Probe(True, time.perf_counter() - start)
