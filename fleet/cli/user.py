"""What users type every day: ``fleet get KIND``, ``fleet describe KIND``, ``fleet queues``,
``fleet clusters``, where KIND is any job kind of :data:`fleet.workloads.KINDS` by any of its
names (plural, singular or short name, as kubectl takes them: ``acjob``, ``pytorchjob``, ...).

They read the fleet endpoint (see :mod:`fleet.cli.client`), never Redis, so they need only the
kubeconfig ``fleet up`` wrote and see exactly what the user's token may see. ``get KIND -M``
also reads each member context of the same kubeconfig (every context but ``fleet``) for the
member copies of the listed jobs, found by their ``fleet.io/job-uid`` label, one row per copy as
``kubectl amc get -M`` shows them (NAME CLUSTER STATE AGE ADOPTION: ``Y`` when the copy is the
one Fleet adopted for the job's current attempt, on its current member; ``N`` for a stale copy
still being purged); a member that cannot be reached is a warning, not a failure, since the
point of looking is often that one is down.

``describe KIND`` of a ``Queued`` job shows, beside its last pending message, its position in its
leaf's queue and its blocker, which the endpoint computes when the job is read by name (see
:mod:`fleet.endpoint.computed`). ``queues`` shows per quota node its limits, use, what it borrows
beyond its ``min`` and lends of it, the share that orders it among its siblings (those below their
``min`` first), and its admitted and waiting jobs (see :mod:`queues.views`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import click
import yaml

from fleet.apiserver import since
from fleet.cli.client import (
    Endpoint,
    EndpointError,
    api_errors,
    as_dict,
    connect,
    context_option,
    endpoint_errors,
    kubeconfig_path_option,
    render_table,
)
from fleet.jobs import (
    Phase,
    attempt_of,
    cluster_of,
    conditions_of,
    current_state,
    job_queue_of,
    last_condition,
    status_of,
)
from fleet.kinds import (
    MEMBER_CLUSTER,
    QUEUE,
    QueueReading,
    amounts,
    nodes_by_free_cell,
    npus_cell,
    ready_condition,
)
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.workloads import KINDS, WorkloadAdapter

__all__ = ["clusters", "describe", "get", "queues"]

_GREEN: Final = frozenset({"Admitted", "Dispatched", "Created", "Running", "Succeeded", "True"})
_YELLOW: Final = frozenset(
    {Phase.QUEUED, Phase.RESCHEDULING, Phase.TERMINATING, "Restarting", "Unknown", "Pending"}
)
_RED: Final = frozenset({"Failed", "False"})


def kind_names(adapter: WorkloadAdapter) -> list[str]:
    """The names a command takes for a job kind: short names, singular, plural, and both
    qualified by the group (kubectl's). Two kinds may share a bare name (Kubeflow's and T9k's
    ``mpijob``): the first kind of the registry keeps it, the other is named with its group."""
    rt = adapter.resource
    qualified = [f"{rt.plural}.{rt.group}", f"{rt.singular}.{rt.group}"]
    return list(dict.fromkeys([*rt.short_names, rt.singular, rt.plural, *qualified]))


def _coordinates(adapter: WorkloadAdapter) -> tuple[str, str, str]:
    rt = adapter.resource
    return rt.group, rt.version, rt.plural


def state_style(value: str) -> Callable[[str], str] | None:
    """The colour of a state or readiness cell: green going well, yellow waiting, red failed."""
    colour = (
        "green" if value in _GREEN else "yellow" if value in _YELLOW else "red" if value in _RED else None
    )
    if colour is None:
        return None
    return lambda text: click.style(text, fg=colour)


def _namespace_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-n", "--namespace", default=None, help="Namespace (default: the context's).")(f)


def _items(listing: object) -> list[dict[str, Any]]:
    return [item for item in as_dict(listing).get("items") or [] if isinstance(item, dict)]


def _state(obj: Mapping[str, Any]) -> str:
    return current_state(obj) or "<none>"


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _age(obj: Mapping[str, Any]) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"))


def _list_jobs(endpoint: Endpoint, adapter: WorkloadAdapter, namespace: str | None) -> list[dict[str, Any]]:
    group, version, plural = _coordinates(adapter)
    if namespace is None:
        listing = endpoint.objects(group, version, plural)
    else:
        listing = endpoint.objects(group, version, plural, namespace)
    return sorted(_items(listing), key=lambda o: (o["metadata"].get("namespace", ""), _name(o)))


def _member_contexts(kubeconfig: Path, fleet_context: str) -> list[str]:
    """The member contexts of the kubeconfig (every context but the fleet's); a ClickException
    saying why when it has none usable. Member access is imported here, for ``-M`` only (the
    plain ``fleet get`` starts without it, issue 33)."""
    from fleet.members import KubeconfigClients, MemberConfigError

    try:
        return list(KubeconfigClients(kubeconfig, fleet_context=fleet_context).members())
    except MemberConfigError as error:
        raise click.ClickException(str(error)) from None


def member_copies(
    kubeconfig: Path, fleet_context: str, adapter: WorkloadAdapter
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Fleet job uid -> (member, member copy) for every member context that answers."""
    try:
        names = _member_contexts(kubeconfig, fleet_context)
    except click.ClickException as error:
        click.echo(f"warning: {error}", err=True)
        return {}
    copies: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    group, version, plural = _coordinates(adapter)
    for member in names:
        try:
            endpoint = connect(kubeconfig, member)
        except click.ClickException as error:
            click.echo(f"warning: {member}: {error.format_message()}", err=True)
            continue
        try:
            listing = endpoint.objects(group, version, plural, labelSelector=JOB_UID_LABEL)
        except api_errors() as error:
            reason = getattr(error, "reason", None) or type(error).__name__
            click.echo(f"warning: {member}: cannot list its {plural} ({reason})", err=True)
            continue
        finally:
            endpoint.close()
        for copy in _items(listing):
            uid = ((copy.get("metadata") or {}).get("labels") or {}).get(JOB_UID_LABEL)
            if uid:
                copies.setdefault(str(uid), []).append((member, copy))
    return copies


@click.group()
def get() -> None:
    """List objects of the fleet."""


def adoption(job: Mapping[str, Any], member: str, copy: Mapping[str, Any]) -> str:
    """``Y`` when ``copy`` in ``member`` is the job's current attempt on its current member."""
    labels = (copy.get("metadata") or {}).get("labels") or {}
    current = (
        labels.get(JOB_UID_LABEL) == (job.get("metadata") or {}).get("uid")
        and labels.get(ATTEMPT_LABEL) == str(attempt_of(job))
        and cluster_of(job) == member
    )
    return "Y" if current else "N"


def _get_jobs(
    adapter: WorkloadAdapter,
    kubeconfig: Path,
    context: str,
    *,
    namespace: str | None,
    all_namespaces: bool,
    members: bool,
    only: str | None = None,
) -> None:
    endpoint = connect(kubeconfig, context)
    try:
        where = None if all_namespaces else namespace or endpoint.namespace
        with endpoint_errors(endpoint.server):
            jobs = _list_jobs(endpoint, adapter, where)
    finally:
        endpoint.close()
    if only is not None:
        jobs = [j for j in jobs if _name(j) == only]
        if not jobs:
            raise EndpointError(f'{adapter.resource.plural}.{adapter.resource.group} "{only}" not found')
    _print_jobs(adapter, kubeconfig, context, jobs, where, members=members)


def _read_job(
    endpoint: Endpoint, adapter: WorkloadAdapter, namespace: str | None, name: str
) -> dict[str, Any]:
    """One job of ``adapter``'s kind as ``endpoint`` stores it (its own namespace by default)."""
    group, version, plural = _coordinates(adapter)
    return as_dict(endpoint.objects(group, version, plural, namespace or endpoint.namespace, name))


def _get_one(
    adapter: WorkloadAdapter, kubeconfig: Path, context: str, *, namespace: str | None, name: str, output: str
) -> None:
    """One job as ``context`` (the fleet, or a member with ``-m``) stores it, whole."""
    endpoint = connect(kubeconfig, context)
    try:
        with endpoint_errors(endpoint.server):
            obj = _read_job(endpoint, adapter, namespace, name)
    finally:
        endpoint.close()
    if output == "json":
        click.echo(json.dumps(obj, indent=4))
    else:
        click.echo(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False), nl=False)


def _print_jobs(
    adapter: WorkloadAdapter,
    kubeconfig: Path,
    context: str,
    jobs: list[dict[str, Any]],
    where: str | None,
    *,
    members: bool,
) -> None:
    if not jobs:
        click.echo("No resources found" + ("." if where is None else f" in {where} namespace."), err=True)
        return
    prefix = ["NAMESPACE"] if where is None else []
    rows: list[list[str]] = []
    if members:
        headers = [*prefix, "NAME", "CLUSTER", "STATE", "AGE", "ADOPTION"]
        copies = member_copies(kubeconfig, context, adapter)
        for job in jobs:
            ns = [str(job["metadata"].get("namespace", ""))] if where is None else []
            found = sorted(copies.get(str(job["metadata"].get("uid")), []), key=lambda pair: pair[0])
            if not found:
                rows.append([*ns, _name(job), "<none>", _state(job), _age(job), "-"])
            for member, copy in found:
                state = _state(copy) if copy.get("status") else "Pending"
                rows.append([*ns, _name(job), member, state, _age(copy), adoption(job, member, copy)])
    else:
        headers = [*prefix, "NAME", "STATE", "CLUSTER", "QUEUE", "AGE"]
        for job in jobs:
            rows.append(
                [
                    *([str(job["metadata"].get("namespace", ""))] if where is None else []),
                    _name(job),
                    _state(job),
                    cluster_of(job) or "<none>",
                    job_queue_of(job) or "<none>",
                    _age(job),
                ]
            )
    state_column = headers.index("STATE")
    click.echo(render_table(headers, rows, {state_column: state_style}), color=None)


def _get_command(adapter: WorkloadAdapter, name: str, *, hidden: bool) -> click.Command:
    @click.command(name, hidden=hidden)
    @kubeconfig_path_option
    @context_option
    @_namespace_option
    @click.argument("job", required=False)
    @click.option("-A", "--all-namespaces", is_flag=True, help="Jobs of every namespace.")
    @click.option(
        "-M", "--members", is_flag=True, help="One row per member copy: NAME CLUSTER STATE AGE ADOPTION."
    )
    @click.option("-m", "--member", default=None, help="With JOB: the copy in this member cluster.")
    @click.option(
        "-o", "--output", type=click.Choice(["yaml", "json"]), default=None, help="With JOB: print it whole."
    )
    def command(
        *,
        kubeconfig: Path,
        context: str,
        namespace: str | None,
        job: str | None,
        all_namespaces: bool,
        members: bool,
        member: str | None,
        output: str | None,
    ) -> None:
        if job is not None and (member is not None or output is not None):
            _get_one(
                adapter, kubeconfig, member or context, namespace=namespace, name=job, output=output or "yaml"
            )
            return
        if member is not None or output is not None:
            raise click.UsageError("-m and -o print one job: name it (fleet get KIND NAME -m MEMBER -o yaml)")
        _get_jobs(
            adapter,
            kubeconfig,
            context,
            namespace=namespace,
            all_namespaces=all_namespaces,
            members=members,
            only=job,
        )

    command.help = (
        f"The {adapter.kind}s ({adapter.resource.group}) at the fleet: STATE, CLUSTER, QUEUE, AGE "
        "(or their member copies with -M)."
    )
    return command


for _adapter in KINDS:
    for _i, _alias in enumerate(kind_names(_adapter)):
        if _alias not in get.commands:
            get.add_command(_get_command(_adapter, _alias, hidden=_i > 0))


def _pod_row(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    """READY, STATUS and RESTARTS of a pod, as ``kubectl get pod`` shows them."""
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or []) or len(containers)
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    shown = str(status.get("phase") or "Pending")
    for c in containers:
        waiting = (c.get("state") or {}).get("waiting") or {}
        terminated = (c.get("state") or {}).get("terminated") or {}
        if waiting.get("reason"):
            shown = str(waiting["reason"])
        elif terminated.get("reason") and shown not in ("Succeeded", "Failed"):
            shown = str(terminated["reason"])
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        shown = "Terminating"
    return f"{ready}/{total}", shown, str(restarts)


@get.command("pod")
@kubeconfig_path_option
@context_option
@_namespace_option
@click.option("-A", "--all-namespaces", is_flag=True, help="Pods of every namespace.")
@click.option(
    "-M", "--members", is_flag=True, required=True, help="The pods of the member copies (required)."
)
def get_pod(
    kubeconfig: Path, context: str, namespace: str | None, all_namespaces: bool, members: bool
) -> None:
    """The pods of Fleet's member copies, in every member: NAME CLUSTER READY STATUS RESTARTS AGE
    (``kubectl amc get pod -M``). Pods live in the members, so -M is required."""
    endpoint = connect(kubeconfig, context)
    where = None if all_namespaces else namespace or endpoint.namespace
    endpoint.close()
    try:
        names = _member_contexts(kubeconfig, context)
    except click.ClickException as error:
        raise EndpointError(str(error)) from None
    rows: list[list[str]] = []
    for member in names:
        try:
            client = connect(kubeconfig, member)
        except click.ClickException as error:
            click.echo(f"warning: {member}: {error.format_message()}", err=True)
            continue
        try:
            if where is None:
                pods = _items(client.objects("", "v1", "pods", labelSelector=JOB_UID_LABEL))
            else:
                pods = _items(client.objects("", "v1", "pods", where, labelSelector=JOB_UID_LABEL))
        except api_errors() as error:
            reason = getattr(error, "reason", None) or type(error).__name__
            click.echo(f"warning: {member}: cannot list its pods ({reason})", err=True)
            continue
        finally:
            client.close()
        for pod in pods:
            ready, shown, restarts = _pod_row(pod)
            ns = [str(pod["metadata"].get("namespace", ""))] if where is None else []
            rows.append([*ns, _name(pod), member, ready, shown, restarts, _age(pod)])
    if not rows:
        click.echo("No resources found" + ("." if where is None else f" in {where} namespace."), err=True)
        return
    rows.sort(key=lambda r: (r[0], r[1]))
    headers = [
        *(["NAMESPACE"] if where is None else []),
        "NAME",
        "CLUSTER",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
    ]
    status_column = headers.index("STATUS")
    click.echo(render_table(headers, rows, {status_column: state_style}), color=None)


for _alias in ("pods", "po"):
    get.add_command(
        click.Command(
            _alias, callback=get_pod.callback, params=get_pod.params, hidden=True, help=get_pod.help
        )
    )


@click.group()
def describe() -> None:
    """Show one object of the fleet in detail."""


def _events(endpoint: Endpoint, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    listing = endpoint.objects(
        "",
        "v1",
        "events",
        meta["namespace"],
        # What kubectl describe asks: the server reads this object's Events, not the namespace's.
        fieldSelector=f"involvedObject.name={meta['name']},involvedObject.namespace={meta['namespace']}",
    )
    mine = []
    for event in _items(listing):
        involved = event.get("involvedObject") or {}
        if involved.get("name") == meta["name"] and involved.get("uid") in (None, "", meta.get("uid")):
            mine.append(event)

    def when(event: Mapping[str, Any]) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")

    return sorted(mine, key=when)


def _fields(pairs: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in pairs) + 2
    return [f"{(label + ':').ljust(width)}{value}" for label, value in pairs]


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.splitlines()]


def _describe_command(adapter: WorkloadAdapter, alias: str, *, hidden: bool) -> click.Command:
    @click.command(alias, hidden=hidden)
    @kubeconfig_path_option
    @context_option
    @_namespace_option
    @click.argument("name")
    def command(kubeconfig: Path, context: str, namespace: str | None, name: str) -> None:
        _describe_job(adapter, kubeconfig, context, namespace, name)

    command.help = (
        f"One {adapter.kind} ({adapter.resource.group}): its state and, while Queued, exactly why it "
        "waits; its conditions and events."
    )
    return command


def _describe_job(
    adapter: WorkloadAdapter, kubeconfig: Path, context: str, namespace: str | None, name: str
) -> None:
    endpoint = connect(kubeconfig, context)
    try:
        with endpoint_errors(endpoint.server):
            job = _read_job(endpoint, adapter, namespace, name)
            events = _events(endpoint, job)
    finally:
        endpoint.close()
    meta, status = job["metadata"], status_of(job)
    state = _state(job)
    last = last_condition(job) or {}
    pairs = [
        ("Name", str(meta["name"])),
        ("Namespace", str(meta.get("namespace", ""))),
        ("State", state),
        ("Reason", str(last.get("reason") or "")),
        ("Pending" if state == Phase.QUEUED else "Message", str(last.get("message") or "")),
        *(
            (label, str(value))
            for label, value in (("Position", status.get("position")), ("Blocker", status.get("blocker")))
            if state == Phase.QUEUED and value
        ),
        ("Queue", job_queue_of(job) or "<none>"),
        ("Cluster", cluster_of(job) or "<none>"),
        ("Attempt", str(attempt_of(job))),
        ("Created", f"{meta.get('creationTimestamp', '')} ({_age(job)} ago)"),
    ]
    if meta.get("deletionTimestamp"):
        until = "until its member copy is confirmed gone and Fleet has released it"
        pairs.append(("Deleting", f"since {meta['deletionTimestamp']}, {until}"))
    lines = _fields(pairs)
    style = state_style(state)
    if style is not None:
        at = 2
        label, _, _ = lines[at].partition(state)
        lines[at] = label + style(state)
    conditions = [
        [
            str(c.get("type", "")),
            str(c.get("reason", "")),
            since(c.get("lastTransitionTime")),
            str(c.get("message", "")),
        ]
        for c in conditions_of(job)
    ]
    lines.append("Conditions:")
    lines += (
        _indent(render_table(["TYPE", "REASON", "AGE", "MESSAGE"], conditions))
        if conditions
        else ["  <none>"]
    )
    replicas = status.get("replicaStatuses") or {}
    if replicas:
        lines.append("Replica Statuses:")
        lines += [
            f"  {kind}: " + ", ".join(f"{k}={v}" for k, v in sorted((counts or {}).items()))
            for kind, counts in sorted(replicas.items())
        ]
    rows = [
        [
            str(e.get("type", "")),
            str(e.get("reason", "")),
            since(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
            + (f" (x{e['count']})" if int(e.get("count") or 1) > 1 else ""),
            str((e.get("source") or {}).get("component") or e.get("reportingComponent") or ""),
            str(e.get("message", "")),
        ]
        for e in events
    ]
    lines.append("Events:")
    lines += (
        _indent(render_table(["TYPE", "REASON", "AGE", "FROM", "MESSAGE"], rows)) if rows else ["  <none>"]
    )
    click.echo("\n".join(lines), color=None)


for _adapter in KINDS:
    for _i, _alias in enumerate(kind_names(_adapter)):
        if _alias not in describe.commands:
            describe.add_command(_describe_command(_adapter, _alias, hidden=_i > 0))


def _list_cluster_kind(
    kubeconfig: Path, context: str, group: str, version: str, plural: str
) -> list[dict[str, Any]]:
    endpoint = connect(kubeconfig, context)
    try:
        with endpoint_errors(endpoint.server):
            listing = endpoint.objects(group, version, plural)
    finally:
        endpoint.close()
    return _items(listing)


@click.command()
@kubeconfig_path_option
@context_option
def queues(kubeconfig: Path, context: str) -> None:
    """The queue of every quota tree node: its limits and use, what it borrows beyond its min and
    lends of it, the share that orders it among its siblings, its admitted and waiting jobs."""
    items = _list_cluster_kind(kubeconfig, context, QUEUE.group, QUEUE.version, QUEUE.plural)
    rows = []
    for item in items:
        queue = QueueReading.of(item)
        rows.append(
            [
                _name(item),
                amounts(queue.min),
                amounts(queue.max),
                amounts(queue.used),
                amounts(queue.borrowed),
                amounts(queue.lent),
                queue.share,
                "true" if queue.below_min else "false",
                str(queue.admitted),
                str(queue.waiting),
            ]
        )

    def waiting(value: str) -> Callable[[str], str] | None:
        return (lambda text: click.style(text, fg="yellow")) if value not in ("", "0") else None

    from queues import HEADERS as QUEUE_HEADERS  # the quota engine's views: only this command's

    click.echo(render_table(list(QUEUE_HEADERS), rows, {len(QUEUE_HEADERS) - 1: waiting}), color=None)


@click.command()
@kubeconfig_path_option
@context_option
def clusters(kubeconfig: Path, context: str) -> None:
    """The member clusters: ready or not (and why), since when, their free and allocatable NPUs
    per accelerator type, and how many nodes have how many NPUs free (``2x8``: two nodes with 8)."""
    items = _list_cluster_kind(
        kubeconfig, context, MEMBER_CLUSTER.group, MEMBER_CLUSTER.version, MEMBER_CLUSTER.plural
    )
    rows = []
    for item in items:
        ready = ready_condition(item)
        status = item.get("status") or {}
        rows.append(
            [
                _name(item),
                str(ready.get("status") or "Unknown"),
                since(ready.get("lastTransitionTime")),
                since(ready.get("lastProbeTime")),
                npus_cell(status),
                str(status.get("scheduling") or "Schedulable"),
                npus_cell(status, "allocatableNPUs"),
                nodes_by_free_cell(status),
                str(ready.get("message") or ""),
            ]
        )
    headers = [
        "NAME",
        "READY",
        "SINCE",
        "LAST-PROBE",
        "FREE-NPUS",
        "SCHEDULING",
        "ALLOCATABLE-NPUS",
        "NODES-BY-FREE-NPUS",
        "MESSAGE",
    ]
    click.echo(render_table(headers, rows, {1: state_style}), color=None)
