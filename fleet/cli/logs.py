"""``fleet logs JOB [-r REPLICA] [-f]``: the logs of a job's pods, where it runs.

The job is read at the fleet (any kind, ``KIND/NAME`` when two kinds share the name); its member
is ``status.cluster``; its pods are found there by the label every member copy's pods carry
(``fleet.io/job-uid``), through the member's context of the same kubeconfig, and their logs read
through the Kubernetes pod log API (``GET .../pods/NAME/log``, what ``kubectl logs`` reads; the
simulated members serve it too). With several pods each line is prefixed ``[pod]``, as
``kubectl logs --prefix`` does; ``-f`` follows every pod until it ends.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import click

from fleet.cli.client import (
    Endpoint,
    EndpointError,
    api_errors,
    connect,
    context_option,
    endpoint_errors,
    kubeconfig_path_option,
    status_message,
)

__all__ = ["logs"]


def _find_job(endpoint: Endpoint, namespace: str, ref: str) -> dict[str, Any]:
    """The job ``ref`` (``NAME`` or ``KIND/NAME``) of ``namespace`` at the fleet."""
    from fleet.cli.user import kind_names
    from fleet.workloads import KINDS

    kind, _, name = ref.rpartition("/")
    adapters = [a for a in KINDS if not kind or kind in kind_names(a)]
    if not adapters:
        served = ", ".join(sorted({a.resource.plural for a in KINDS}))
        raise EndpointError(f'no job kind named "{kind}" (the kinds served: {served})')
    found = []
    for adapter in adapters:
        rt = adapter.resource
        try:
            with endpoint_errors(endpoint.server):
                found.append(endpoint.objects(rt.group, rt.version, rt.plural, namespace, name))
        except EndpointError as error:
            if "not found" not in str(error):
                raise
    if not found:
        raise EndpointError(f'no job named "{name}" in namespace {namespace}')
    if len(found) > 1:
        kinds = ", ".join(f"{job.get('kind')}" for job in found)
        raise EndpointError(f'{len(found)} jobs are named "{name}" ({kinds}): name one as KIND/{name}')
    return found[0]


def _replica_matches(pod_name: str, job_name: str, replica: str | None) -> bool:
    """``-r worker`` takes the job's worker pods, ``-r worker-1`` that one (``JOB-worker-1``)."""
    if replica is None:
        return True
    rest = pod_name.removeprefix(f"{job_name}-")
    return rest == replica or rest.rsplit("-", 1)[0] == replica


def _container(pod: dict[str, Any]) -> str | None:
    containers = (pod.get("spec") or {}).get("containers") or []
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get("kubectl.kubernetes.io/default-container") or (
        str(containers[0].get("name")) if containers else None
    )


@click.command()
@click.argument("job")
@click.option(
    "-r",
    "--replica",
    default=None,
    help="Only this replica: a type (worker, master) or TYPE-INDEX (worker-1).",
)
@click.option("-f", "--follow", is_flag=True, help="Stream the logs until the pods end.")
@click.option("--tail", type=int, default=None, help="Lines of the end of each log to show (default: all).")
@click.option("-n", "--namespace", default=None, help="Namespace (default: the context's).")
@kubeconfig_path_option
@context_option
def logs(
    *,
    job: str,
    replica: str | None,
    follow: bool,
    tail: int | None,
    namespace: str | None,
    kubeconfig: Path,
    context: str,
) -> None:
    """The logs of JOB's pods ([KIND/]NAME) in the member it runs on."""
    from fleet.jobs import cluster_of, current_state
    from fleet.labels import JOB_UID_LABEL

    endpoint = connect(kubeconfig, context)
    try:
        where = namespace or endpoint.namespace
        obj = _find_job(endpoint, where, job)
    finally:
        endpoint.close()
    name = str(obj["metadata"]["name"])
    member = cluster_of(obj)
    if not member:
        state = current_state(obj) or "<none>"
        raise EndpointError(f"{name} runs on no member now ({state}): it has no pods to read")
    try:
        member_endpoint = connect(kubeconfig, member)
    except click.ClickException:
        raise EndpointError(
            f"{name} runs on {member}, and {kubeconfig} has no context {member!r} to read its pods "
            "(fleet up's kubeconfig has one per member)"
        ) from None
    try:
        with endpoint_errors(member_endpoint.server):
            listing = member_endpoint.objects(
                "", "v1", "pods", where, labelSelector=f"{JOB_UID_LABEL}={obj['metadata']['uid']}"
            )
        pods = sorted(
            (p for p in listing.get("items") or [] if _replica_matches(p["metadata"]["name"], name, replica)),
            key=lambda p: str(p["metadata"]["name"]),
        )
        if not pods:
            which = f" of replica {replica}" if replica else ""
            raise EndpointError(f"{name} has no pods{which} in {member} yet")
        prefix = len(pods) > 1
        if not follow:
            for pod in pods:
                _print_log(member_endpoint, where, pod, tail=tail, follow=False, prefix=prefix)
            return
        threads = [
            threading.Thread(
                target=_print_log,
                args=(member_endpoint, where, pod),
                kwargs={"tail": tail, "follow": True, "prefix": prefix},
                daemon=True,
            )
            for pod in pods
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    finally:
        member_endpoint.close()


_OUT = threading.Lock()


def _print_log(
    endpoint: Endpoint, namespace: str, pod: dict[str, Any], *, tail: int | None, follow: bool, prefix: bool
) -> None:
    pod_name = str(pod["metadata"]["name"])
    lead = f"[{pod_name}] " if prefix else ""
    query = {
        "container": _container(pod),
        "follow": "true" if follow else None,
        "tailLines": str(tail) if tail is not None else None,
    }
    try:
        response = endpoint.stream(f"/api/v1/namespaces/{namespace}/pods/{pod_name}/log", **query)
    except api_errors() as error:
        with _OUT:
            click.echo(f"warning: {pod_name}: {status_message(error)}", err=True)
        return
    try:
        buffered = b""
        for chunk in response.stream(1024, decode_content=True):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            with _OUT:
                for line in lines:
                    click.echo(lead + line.decode("utf-8", errors="replace"))
                sys.stdout.flush()
        if buffered:
            with _OUT:
                click.echo(lead + buffered.decode("utf-8", errors="replace"))
    except api_errors() as error:
        with _OUT:
            click.echo(f"warning: {pod_name}: the log stream ended: {error}", err=True)
    finally:
        response.release_conn()
