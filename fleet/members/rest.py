"""A member's REST calls through the official client's ``ApiClient``, without its generated API
classes: a resource's path, verb and JSON body in, the raw urllib3 response out.

Why not ``CoreV1Api`` and ``CustomObjectsApi``: the first is a 4.5 MB module whose import costs
about 0.7 s of CPU in every role process and every ``fleet`` command that reaches a member (more
than the rest of the client), and every generated method walks its body with
``sanitize_for_serialization`` before the REST layer encodes it (about 200 us for a sample
AscendJob, on every copy a worker creates), although Fleet's bodies are plain JSON already.

What stays the client's: the URL and the quoting of its path parameters and query
(``ApiClient.param_serialize``), the authentication (bearer token with its refresh hook, client
certificates), TLS and connection pool, the encoding of the body and the request
(``ApiClient.call_api``), and the error of a non-2xx answer (``ApiException.from_response``),
exactly as the generated methods do with ``_preload_content=False``. The paths are the
Kubernetes API's own (``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from kubernetes.client.exceptions import ApiException

from fleet.members.resource import Resource

if TYPE_CHECKING:
    from kubernetes.client import ApiClient
    from urllib3 import BaseHTTPResponse

__all__ = ["Rest", "resource_path"]

#: What every call authenticates with (the generated methods name the same scheme).
_AUTH: Final = ["BearerToken"]
_ACCEPT: Final = {"Accept": "application/json"}
_JSON: Final = {"Accept": "application/json", "Content-Type": "application/json"}

Timeout = tuple[float, float]
Query = Sequence[tuple[str, Any]]


def resource_path(resource: Resource, namespace: str | None, name: str | None) -> tuple[str, dict[str, str]]:
    """The path template of ``resource`` (a collection, or one object with ``name``) and its
    parameters, as the Kubernetes API lays them out."""
    params: dict[str, str] = {"version": resource.version or "v1", "plural": resource.name}
    path = "/api/{version}"
    if resource.group:
        path = "/apis/{group}/{version}"
        params["group"] = resource.group
    if namespace is not None:
        path += "/namespaces/{namespace}"
        params["namespace"] = namespace
    path += "/{plural}"
    if name is not None:
        path += "/{name}"
        params["name"] = name
    return path, params


class Rest:
    """The calls of one member's ``ApiClient``; each returns the raw response (the caller reads
    and releases it) or raises the client's ``ApiException`` for a non-2xx answer."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def get(
        self, resource: Resource, namespace: str | None, name: str, *, timeout: Timeout
    ) -> BaseHTTPResponse:
        return self._send("GET", resource, namespace, name, timeout=timeout)

    def create(
        self, resource: Resource, namespace: str | None, body: Mapping[str, Any], *, timeout: Timeout
    ) -> BaseHTTPResponse:
        return self._send("POST", resource, namespace, None, body=body, timeout=timeout)

    def replace(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        timeout: Timeout,
    ) -> BaseHTTPResponse:
        return self._send("PUT", resource, namespace, name, body=body, timeout=timeout)

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        body: Mapping[str, Any] | None = None,
        timeout: Timeout,
    ) -> BaseHTTPResponse:
        return self._send("DELETE", resource, namespace, name, body=body, timeout=timeout)

    def list(
        self, resource: Resource, namespace: str | None, *, query: Query, timeout: Timeout
    ) -> BaseHTTPResponse:
        """A list (or, with ``watch=true`` in ``query``, a watch stream: read it line by line)."""
        return self._send("GET", resource, namespace, None, query=query, timeout=timeout)

    def _send(
        self,
        method: str,
        resource: Resource,
        namespace: str | None,
        name: str | None,
        *,
        body: Mapping[str, Any] | None = None,
        query: Query = (),
        timeout: Timeout,
    ) -> BaseHTTPResponse:
        path, params = resource_path(resource, namespace, name)
        _, url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            path_params=params,
            query_params=[(k, v) for k, v in query if v is not None],
            header_params=dict(_JSON if body is not None else _ACCEPT),
            auth_settings=list(_AUTH),
        )
        response = self.api_client.call_api(
            method, url, header_params=headers, body=body, _request_timeout=timeout
        )
        if not 200 <= response.status <= 299:
            response.read()  # type: ignore[no-untyped-call]
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        raw: BaseHTTPResponse = response.response
        return raw
