"""How the everyday commands reach the fleet endpoint: a kubeconfig context, errors, tables.

Users and admins hold a kubeconfig, not a Redis URL: ``fleet up`` writes one with the context
``fleet`` (the endpoint) and one context per member. So these commands go through the official
``kubernetes`` client exactly as kubectl does, with the same auth and the same answers, and a
refused request reads as the endpoint's own Status message. Tables are aligned on their plain
text and coloured afterwards; :func:`click.echo` drops the colour when stdout is not a terminal.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import ssl
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
import urllib3
import yaml

from fleet.members import FLEET_CONTEXT

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

__all__ = [
    "DEFAULT_KUBECONFIG",
    "REQUEST_TIMEOUT",
    "Endpoint",
    "EndpointError",
    "Refused",
    "api_errors",
    "as_dict",
    "connect",
    "context_option",
    "endpoint_errors",
    "kubeconfig_path_option",
    "render_table",
    "warnings_of",
]

#: Where ``fleet up`` writes its kubeconfig.
DEFAULT_KUBECONFIG: Final = "./fleet.kubeconfig"
#: Connect and read timeouts of one request (seconds): a CLI should fail fast, not hang.
REQUEST_TIMEOUT: Final = (5.0, 30.0)

F = TypeVar("F", bound=Callable[..., Any])
_WARNING: Final = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def kubeconfig_path_option(f: F) -> F:
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=lambda: os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG,
        show_default=f"$KUBECONFIG or {DEFAULT_KUBECONFIG}",
        help="Kubeconfig with the fleet context (and one context per member, for -M).",
    )(f)


def context_option(f: F) -> F:
    return click.option(
        "--context",
        default=FLEET_CONTEXT,
        show_default=True,
        help="The kubeconfig context of the fleet endpoint.",
    )(f)


class EndpointError(click.ClickException):
    """A failure already worded for the user; printed as ``error: ...``, exit status 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class Refused(Exception):
    """The endpoint answered a GET with an error status (what ``ApiException`` says, without
    importing the ``kubernetes`` client)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body


def api_errors() -> tuple[type[BaseException], ...]:
    """What a call through an :class:`Endpoint` raises when refused or unreachable: for an
    ``except`` clause (the ``kubernetes`` client's own error only once something imported it)."""
    import sys

    errors: tuple[type[BaseException], ...] = (Refused, urllib3.exceptions.HTTPError)
    exceptions = sys.modules.get("kubernetes.client.exceptions")
    if exceptions is not None:
        errors += (exceptions.ApiException,)
    return errors


@dataclass
class Endpoint:
    """One kubeconfig context, as a client: its default namespace and where it points.

    Reads (:meth:`get`) go over ``urllib3`` with the context's server, CA and credentials, so
    the everyday commands start without importing the ``kubernetes`` client, whose import alone
    takes about half a second (issue 33, req. 7). A kubeconfig whose credentials this reader
    does not know (an exec plugin, an auth provider) is read by the ``kubernetes`` client's
    loader instead. :attr:`api`, :attr:`custom` and :attr:`core`, the official client, are built
    on first use, for the commands that write.
    """

    path: Path
    context: str
    namespace: str
    server: str
    #: Header name -> value sent with every request (the bearer token).
    headers: dict[str, str]
    pool: urllib3.PoolManager
    _api: ApiClient | None = None

    def get(self, path: str, **query: str | None) -> dict[str, Any]:
        """GET ``path`` (``/apis/...``) with ``query``; the decoded JSON object, or :class:`Refused`."""
        params = {k: v for k, v in query.items() if v is not None}
        url = self.server.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
        response = self.pool.request(
            "GET",
            url,
            headers={"Accept": "application/json", **self.headers},
            timeout=urllib3.Timeout(connect=REQUEST_TIMEOUT[0], read=REQUEST_TIMEOUT[1]),
            retries=False,
        )
        body = response.data.decode("utf-8", errors="replace")
        if response.status >= 400:
            raise Refused(response.status, response.reason or "", body)
        return as_dict(json.loads(body or "{}"))

    def stream(self, path: str, **query: str | None) -> Any:
        """GET ``path`` unread (a log, a watch): the ``urllib3`` response to read as it comes, or
        :class:`Refused`. No read timeout: a followed log may be quiet for long."""
        params = {k: v for k, v in query.items() if v is not None}
        url = self.server.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
        response = self.pool.request(
            "GET",
            url,
            headers=self.headers,
            timeout=urllib3.Timeout(connect=REQUEST_TIMEOUT[0], read=None),
            retries=False,
            preload_content=False,
        )
        if response.status >= 400:
            body = response.read().decode("utf-8", errors="replace")
            response.release_conn()
            raise Refused(response.status, response.reason or "", body)
        return response

    def objects(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        name: str | None = None,
        **query: str | None,
    ) -> dict[str, Any]:
        """A list (or, with ``name``, one object) of a kind: ``group`` empty for the core group."""
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        path = (
            base
            + (f"/namespaces/{namespace}" if namespace else "")
            + f"/{plural}"
            + (f"/{name}" if name else "")
        )
        return self.get(path, **query)

    @property
    def api(self) -> ApiClient:
        if self._api is None:
            self._api = _kubernetes_client(self.path, self.context)
        return self._api

    @property
    def custom(self) -> CustomObjectsApi:
        from kubernetes.client import CustomObjectsApi

        return CustomObjectsApi(self.api)

    @property
    def core(self) -> CoreV1Api:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.api)

    def close(self) -> None:
        self.pool.clear()
        if self._api is not None:
            self._api.close()  # type: ignore[no-untyped-call]


def _kubernetes_client(path: Path, context: str) -> ApiClient:
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    configuration = Configuration()
    try:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, OSError, ValueError) as error:
        raise EndpointError(f"kubeconfig {path}: context {context}: {error}") from None
    configuration.retries = False
    return ApiClient(configuration)


def _entry(config: Mapping[str, Any], section: str, key: str, name: str) -> dict[str, Any] | None:
    for entry in config.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            return as_dict(entry.get(key))
    return None


#: The credentials and cluster fields :func:`connect` reads itself; any other goes to the client.
_OWN_USER: Final = frozenset(
    {"token", "tokenFile", "client-certificate-data", "client-key-data", "client-certificate", "client-key"}
)
_OWN_CLUSTER: Final = frozenset(
    {
        "server",
        "certificate-authority-data",
        "certificate-authority",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "extensions",
    }
)


def _data_or_file(entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(str(entry[f"{key}-data"]))
    if entry.get(key):
        return (base / str(entry[key])).expanduser().read_bytes()
    return None


def _pool(cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path) -> urllib3.PoolManager:
    if not str(cluster.get("server", "")).startswith("https"):
        return urllib3.PoolManager()
    context = ssl.create_default_context()
    ca = _data_or_file(cluster, "certificate-authority", base)
    if ca is not None:
        context = ssl.create_default_context(cadata=ca.decode())
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = _data_or_file(user, "client-certificate", base)
    key = _data_or_file(user, "client-key", base)
    if cert is not None and key is not None:
        with tempfile.TemporaryDirectory() as folder:  # ssl loads a chain from files only
            cert_file, key_file = Path(folder) / "cert.pem", Path(folder) / "key.pem"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            context.load_cert_chain(cert_file, key_file)
    extra: dict[str, Any] = {}
    if cluster.get("tls-server-name"):
        extra["server_hostname"] = str(cluster["tls-server-name"])
    return urllib3.PoolManager(ssl_context=context, **extra)


def connect(path: Path, context: str = FLEET_CONTEXT) -> Endpoint:
    """A client of ``context`` in the kubeconfig at ``path`` (no retries: the user sees failures)."""
    if not path.is_file():
        raise EndpointError(f"kubeconfig {path}: no such file (run `fleet up`, or pass --kubeconfig)")
    try:
        config = as_dict(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError) as error:
        raise EndpointError(f"kubeconfig {path}: {error}") from None
    entry = _entry(config, "contexts", "context", context)
    if entry is None:
        raise EndpointError(f"kubeconfig {path}: no context named {context!r}")
    namespace = str(entry.get("namespace") or "default")
    cluster = _entry(config, "clusters", "cluster", str(entry.get("cluster", ""))) or {}
    user = _entry(config, "users", "user", str(entry.get("user", ""))) or {}
    if not cluster.get("server"):
        raise EndpointError(
            f"kubeconfig {path}: context {context}: no server for cluster {entry.get('cluster')!r}"
        )
    if set(user) <= _OWN_USER and set(cluster) <= _OWN_CLUSTER:
        base = path.parent
        try:
            headers = {}
            token = user.get("token") or (
                (base / str(user["tokenFile"])).read_text().strip() if user.get("tokenFile") else None
            )
            if token:
                headers["Authorization"] = f"Bearer {token}"
            pool = _pool(cluster, user, base)
        except (OSError, ValueError, ssl.SSLError) as error:
            raise EndpointError(f"kubeconfig {path}: context {context}: {error}") from None
        return Endpoint(path, context, namespace, str(cluster["server"]), headers, pool)
    # Credentials only the client knows (exec plugins, auth providers): its loader, its headers.
    api = _kubernetes_client(path, context)
    configuration = api.configuration
    auth = configuration.get_api_key_with_prefix("BearerToken")
    headers = {"Authorization": auth} if auth else {}
    pool = urllib3.PoolManager(
        cert_reqs="CERT_REQUIRED" if configuration.verify_ssl else "CERT_NONE",
        ca_certs=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
    )
    return Endpoint(path, context, namespace, str(configuration.host), headers, pool, api)


def as_dict(value: object) -> dict[str, Any]:
    """A decoded answer of the client as a dict (the client types custom objects as ``object``)."""
    return value if isinstance(value, dict) else {}


def status_message(error: Any) -> str:
    """The endpoint's own words for a refusal: its Status message and field causes."""
    try:
        status = json.loads(error.body or "")
    except (TypeError, ValueError):
        status = None
    if not isinstance(status, dict) or not status.get("message"):
        return f"{error.status} {error.reason}".strip()
    lines = [str(status["message"])]
    causes = (status.get("details") or {}).get("causes") or []
    if len(causes) > 1:
        lines += [f"  {cause.get('field', '')}: {cause.get('message', '')}" for cause in causes]
    return "\n".join(lines)


@contextlib.contextmanager
def endpoint_errors(server: str) -> Iterator[None]:
    """Turn a refusal or an unreachable endpoint into one ``error:`` message and exit status 1."""
    try:
        yield
    except urllib3.exceptions.HTTPError as error:
        reason = getattr(error, "reason", None) or error
        raise EndpointError(f"cannot reach the fleet endpoint at {server}: {reason}") from None
    except api_errors() as error:  # Refused, or the kubernetes client's ApiException
        status = getattr(error, "status", None)
        if status in (None, 0):
            reason = getattr(error, "reason", None)
            raise EndpointError(f"cannot reach the fleet endpoint at {server}: {reason}") from None
        raise EndpointError(status_message(error)) from None


def warnings_of(headers: Mapping[str, str] | Any) -> list[str]:
    """The texts of the ``Warning: 299 - "text"`` headers of an answer (kubectl prints them too)."""
    if headers is None:
        return []
    getlist = getattr(headers, "getlist", None)
    values: list[str] = list(getlist("Warning")) if getlist is not None else [headers.get("Warning") or ""]
    texts: list[str] = []
    for value in values:
        for match in _WARNING.finditer(value):
            texts.append(re.sub(r"\\(.)", r"\1", match.group(1)))
    return texts


Style = Callable[[str], str] | None


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    styles: Mapping[int, Callable[[str], Style]] | None = None,
) -> str:
    """Rows aligned in columns three spaces apart, kubectl's way; ``styles[i](cell)`` may colour a
    cell of column ``i`` (applied after padding, so escape codes never break the alignment)."""
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = []
    header = "   ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    lines.append(click.style(header, bold=True))
    for row in rows:
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            text = str(cell)
            padded = text if i == len(widths) - 1 else text.ljust(width)
            style = (styles or {}).get(i)
            paint = style(text) if style is not None else None
            cells.append(paint(padded) if paint is not None else padded)
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)
