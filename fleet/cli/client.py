"""How the everyday commands reach the fleet endpoint: a kubeconfig context, errors, tables.

Users and admins hold a kubeconfig, not a Redis URL: ``fleet up`` writes one with the context
``fleet`` (the endpoint) and one context per member. So these commands go through the official
``kubernetes`` client exactly as kubectl does, with the same auth and the same answers, and a
refused request reads as the endpoint's own Status message. Tables are aligned on their plain
text and coloured afterwards; :func:`click.echo` drops the colour when stdout is not a terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import click
import urllib3
from kubernetes.client import ApiClient, Configuration, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from fleet.members import FLEET_CONTEXT

__all__ = [
    "DEFAULT_KUBECONFIG",
    "REQUEST_TIMEOUT",
    "Endpoint",
    "EndpointError",
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


@dataclass
class Endpoint:
    """One kubeconfig context, as a client: the API, its default namespace and where it points."""

    api: ApiClient
    namespace: str
    server: str

    @property
    def custom(self) -> CustomObjectsApi:
        return CustomObjectsApi(self.api)

    @property
    def core(self) -> CoreV1Api:
        return CoreV1Api(self.api)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]


def _context_namespace(path: Path, context: str) -> str:
    contexts, _ = kube_config.list_kube_config_contexts(str(path))  # type: ignore[no-untyped-call]
    for entry in contexts or ():
        if isinstance(entry, dict) and entry.get("name") == context:
            return str((entry.get("context") or {}).get("namespace") or "default")
    raise EndpointError(f"kubeconfig {path}: no context named {context!r}")


def connect(path: Path, context: str = FLEET_CONTEXT) -> Endpoint:
    """A client of ``context`` in the kubeconfig at ``path`` (no retries: the user sees failures)."""
    if not path.is_file():
        raise EndpointError(f"kubeconfig {path}: no such file (run `fleet up`, or pass --kubeconfig)")
    configuration = Configuration()
    try:
        namespace = _context_namespace(path, context)
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, OSError, ValueError) as error:
        raise EndpointError(f"kubeconfig {path}: context {context}: {error}") from None
    configuration.retries = False
    return Endpoint(ApiClient(configuration), namespace, str(configuration.host))


def as_dict(value: object) -> dict[str, Any]:
    """A decoded answer of the client as a dict (the client types custom objects as ``object``)."""
    return value if isinstance(value, dict) else {}


def status_message(error: ApiException) -> str:
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
    except ApiException as error:
        if error.status in (None, 0):
            raise EndpointError(f"cannot reach the fleet endpoint at {server}: {error.reason}") from None
        raise EndpointError(status_message(error)) from None
    except urllib3.exceptions.HTTPError as error:
        reason = getattr(error, "reason", None) or error
        raise EndpointError(f"cannot reach the fleet endpoint at {server}: {reason}") from None


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
