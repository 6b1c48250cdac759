"""``fleet explain``: the user's answer to "why won't my job run?", asked of the fleet.

The job file (``-f FILE``, or ``-f -`` for standard input, as kubectl reads it) is sent to the
fleet endpoint's ``explain`` subresource of its kind (:mod:`fleet.endpoint.explain`) with the
kubeconfig's ``fleet`` context (``--kubeconfig``, else ``$KUBECONFIG``, else ``./fleet.kubeconfig``,
as the other commands read it), so a tenant's token is enough and the answer is the fleet's own:
the same schema, namespace, quota and placement checks a submission meets, on the capacity and
health the fleet records. Nothing is created, queued or reserved.

It prints the member the job would go to (or that it fits nowhere), each member's line, and
where the job would stand in its queue with the quota's answer. The file may hold the job's
ConfigMaps, Secrets and Services beside it (as ``kubectl apply -f`` takes them): the job is
explained, and each object it references is listed as in the file or expected at the fleet.

Exit codes: 0 it would be admitted and placed now; 1 the fleet would refuse it (or the file is
unreadable, or the fleet cannot be reached); 2 it would wait (quota or capacity now); 3 it can
never run as the fleet is (larger than a ``max`` of its quota chain, or than any member).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import click
import yaml
from kubernetes.client.exceptions import ApiException

from fleet.cli.client import (
    REQUEST_TIMEOUT,
    Endpoint,
    EndpointError,
    as_dict,
    connect,
    context_option,
    endpoint_errors,
    kubeconfig_path_option,
    warnings_of,
)
from fleet.dispatch import references
from fleet.workloads import UnknownKind, adapter_for

__all__ = ["EXIT_FITS", "EXIT_INVALID", "EXIT_NEVER", "EXIT_WAITS", "explain"]

EXIT_FITS: Final = 0
EXIT_INVALID: Final = 1
EXIT_WAITS: Final = 2
EXIT_NEVER: Final = 3

_EXITS: Final = {"Fits": EXIT_FITS, "Waits": EXIT_WAITS, "NeverAdmitted": EXIT_NEVER, "NeverFits": EXIT_NEVER}


def _read(source: str) -> tuple[str, str]:
    """The text of ``-f`` and how to name it in messages (``-`` is standard input)."""
    if source == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(source).read_text(encoding="utf-8"), source
    except OSError as error:
        raise click.ClickException(f"{source}: {error.strerror or error}") from None


def _load_job(text: str, where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one job of a file and the other objects beside it. A file whose only object is of a
    kind the fleet does not serve is refused here, naming the kinds it does
    (:class:`fleet.workloads.UnknownKind`): the one place ``fleet explain`` says so."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{where}: not valid YAML: {exc}") from None
    if not all(isinstance(d, dict) for d in docs):
        raise click.ClickException(f"{where}: every document must be an object")
    jobs, others = [], []
    for doc in docs:
        try:
            adapter_for(doc)
            jobs.append(doc)
        except UnknownKind:
            others.append(doc)
    _refuse_unserved(others, where)
    if len(jobs) == 1:
        return jobs[0], others
    if not jobs and len(docs) == 1:
        try:
            adapter_for(docs[0])
        except UnknownKind as error:
            raise click.ClickException(f"{where}: {error}") from None
    kinds = ", ".join(sorted({str(d.get("kind")) for d in docs})) or "nothing"
    raise click.ClickException(f"{where}: must hold exactly one job object, holds {len(jobs)} ({kinds})")


def _refuse_unserved(docs: list[dict[str, Any]], where: str) -> None:
    """A file with an object of a kind the fleet does not serve is refused whole, naming that kind
    and the kinds the fleet serves: ``kubectl apply`` would create the objects before it (a
    ConfigMap the job needs) and then fail on it (``no matches for kind``)."""
    from fleet.endpoint import served_kinds

    served = served_kinds()
    for doc in docs:
        named = f"{doc.get('kind')} ({doc.get('apiVersion')})"
        if named not in served:
            raise click.ClickException(
                f"{where}: the fleet does not serve kind {doc.get('kind')!r} in version "
                f"{doc.get('apiVersion')!r}; it serves {', '.join(served)}"
            )


def _companions(job: dict[str, Any], others: list[dict[str, Any]]) -> list[str]:
    """One line per object the job references and per other object of the file."""
    beside = {(str(d.get("kind")), str((d.get("metadata") or {}).get("name"))) for d in others}
    lines = []
    for ref in references(job):
        if (ref.kind, ref.name) in beside:
            lines.append(f"  {ref.kind} {ref.name}: in this file, sent with the job (propagateDeps)")
        elif not ref.optional:
            lines.append(f"  {ref.kind} {ref.name}: referenced, not in this file (must exist at the fleet)")
    wanted = {(ref.kind, ref.name) for ref in references(job)}
    for kind, name in sorted(beside - wanted):
        lines.append(f"  {kind} {name}: in this file, not referenced by the job")
    return lines


def ask(endpoint: Endpoint, job: dict[str, Any], namespace: str) -> tuple[dict[str, Any], list[str]]:
    """The fleet's Explanation of ``job`` (in ``namespace`` unless it names its own) and the
    warnings the answer carried; a refusal raises :class:`~fleet.cli.client.EndpointError`."""
    adapter = adapter_for(job)
    meta = job.setdefault("metadata", {})
    namespace = str(meta.get("namespace") or namespace)
    meta["namespace"] = namespace
    name = str(meta.get("name") or "")
    if not name:
        raise EndpointError("the job has no metadata.name (explain names the job it is asked about)")
    rt = adapter.resource
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    path = f"{prefix}/namespaces/{namespace}/{rt.plural}/{name}/explain"
    with endpoint_errors(endpoint.server):
        request = endpoint.api.param_serialize(
            method="POST",
            resource_path=path,
            query_params=[("fieldValidation", "Strict")],  # what kubectl apply asks for
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=job,
            auth_settings=["BearerToken"],
        )
        response = endpoint.api.call_api(*request, _request_timeout=REQUEST_TIMEOUT)
        raw = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise EndpointError(f"the fleet endpoint at {endpoint.server} answered with no JSON") from None
    headers = response.headers
    return as_dict(data), warnings_of(headers)


def _rows(placement: dict[str, Any]) -> str:
    rows = []
    for row in placement.get("nodes") or []:
        pods = int(row.get("pods") or 0)
        rows.append(f"{row.get('node')} ({row.get('replicaType')}{f' x{pods}' if pods > 1 else ''})")
    return ", ".join(rows)


def render(answer: dict[str, Any], name: str) -> list[str]:
    """What ``fleet explain`` prints of an Explanation."""
    status = as_dict(answer.get("status"))
    verdict = str(status.get("verdict") or "")
    placement = as_dict(status.get("placement"))
    lines = []
    if placement:
        head = f"{name} fits on {placement.get('member')} ({placement.get('strategy')}): {_rows(placement)}"
        lines.append(head if verdict == "Fits" else f"{head}, but it waits")
    elif verdict == "NeverFits":
        lines.append(f"{name} can never fit on any member as the fleet is:")
    elif verdict == "NeverAdmitted":
        lines.append(f"{name} can never be admitted by its quota:")
    else:
        lines.append(f"{name} fits on no member now:")
    for member in status.get("members") or []:
        ready = "" if member.get("ready") == "True" else f" [Ready: {member.get('ready')}]"
        lines.append(f"  {member.get('name')}: {member.get('message')}{ready}")
    if status.get("position"):
        lines.append(f"queue: {status.get('position')}")
    if status.get("quota"):
        lines.append(f"quota: {status.get('quota')}")
    if status.get("policy"):
        lines.append(f"policy: {status.get('policy')}")
    lines.append(f"verdict: {verdict}: {status.get('message')}")
    return lines


@click.command()
@click.option(
    "-f",
    "--filename",
    "source",
    required=True,
    help="The job YAML (of any kind Fleet serves), alone or with the objects it references "
    "(multi-document); - reads standard input.",
)
@click.option(
    "-n", "--namespace", default=None, help="The job's namespace when it names none (else the context's)."
)
@kubeconfig_path_option
@context_option
def explain(source: str, namespace: str | None, kubeconfig: Path, context: str) -> None:
    """Say whether the fleet would take a job now and where it would run, or why not.

    Exit status: 0 it would be admitted and placed now, 1 the fleet would refuse it, 2 it would
    wait, 3 it can never run as the fleet is.
    """
    try:
        text, where = _read(source)
        job, others = _load_job(text, where)
    except click.ClickException as exc:
        click.echo(f"error: {exc.message}", err=True)
        raise SystemExit(EXIT_INVALID) from None
    endpoint = connect(kubeconfig, context)
    try:
        answer, warnings = ask(endpoint, job, namespace or endpoint.namespace)
    except EndpointError as error:
        error.show()
        raise SystemExit(EXIT_INVALID) from None
    finally:
        endpoint.close()
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)
    meta = job.get("metadata") or {}
    for line in render(answer, f"{meta.get('namespace')}/{meta.get('name')}"):
        click.echo(line)
    companions = _companions(job, others)
    if companions:
        click.echo("with:")
        for line in companions:
            click.echo(line)
    verdict = str(as_dict(answer.get("status")).get("verdict") or "")
    raise SystemExit(_EXITS.get(verdict, EXIT_WAITS))
