"""``fleet explain``: the user's answer to "why won't my job run?".

Evaluates a job file against the current capacity of the members in a kubeconfig (every context
but ``fleet``), with the same adapter, fit and explanations the dispatcher uses, and prints the
member it would choose or, per member, the nearest miss. The file may hold the job's ConfigMaps,
Secrets and Services beside it (as ``kubectl apply -f`` takes it): the job is evaluated, and each
object it references is listed as in the file or expected at the fleet. Exit codes: 0 fits
somewhere, 1 the job is invalid (or unreadable), 2 fits nowhere. Nothing is reserved or created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from fleet.dispatch import references
from fleet.members import MemberConfigError, MemberError, load_members
from fleet.placement import MemberCapacity, Placer, Strategy, never_fits
from fleet.workloads import InvalidWorkload, UnknownKind, adapter_for

__all__ = ["EXIT_FITS", "EXIT_INVALID", "EXIT_NO_FIT", "explain"]

EXIT_FITS = 0
EXIT_INVALID = 1
EXIT_NO_FIT = 2


def _load_job(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one job of a file and the other objects beside it (a job's file may carry the
    ConfigMaps, Secrets and Services it references, as ``kubectl apply -f`` takes them)."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{path}: not valid YAML: {exc}") from None
    if not all(isinstance(d, dict) for d in docs):
        raise click.ClickException(f"{path}: every document must be an object")
    jobs, others = [], []
    for doc in docs:
        try:
            adapter_for(doc)
            jobs.append(doc)
        except UnknownKind:
            others.append(doc)
    if len(jobs) == 1:
        return jobs[0], others
    if not jobs and len(docs) == 1:
        return docs[0], []  # not a job kind: adapter_for says which kinds are
    kinds = ", ".join(sorted({str(d.get("kind")) for d in docs})) or "nothing"
    raise click.ClickException(f"{path}: must hold exactly one job object, holds {len(jobs)} ({kinds})")


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


@click.command()
@click.option(
    "-f",
    "--filename",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The job YAML (of any kind Fleet serves), alone or with the objects it references (multi-document).",
)
@click.option(
    "--kubeconfig",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kubeconfig whose contexts (except 'fleet') are the member clusters.",
)
@click.option(
    "--policy",
    type=click.Choice(["pack", "spread"]),
    default="pack",
    show_default=True,
    help="How to choose among members that fit: least capacity left (pack) or most (spread).",
)
def explain(path: Path, kubeconfig: Path, policy: str) -> None:
    """Say where a job would run now, or why it fits nowhere."""
    try:
        job, others = _load_job(path)
        adapter = adapter_for(job)
        demand = adapter.demand(job)
    except click.ClickException as exc:
        click.echo(f"error: {exc.message}", err=True)
        raise SystemExit(EXIT_INVALID) from None
    except UnknownKind as exc:
        click.echo(f"error: {path}: {exc}", err=True)
        raise SystemExit(EXIT_INVALID) from None
    except InvalidWorkload as exc:
        click.echo(f"error: {path}: the job is invalid:", err=True)
        for error in exc.errors:
            click.echo(f"  {error}", err=True)
        raise SystemExit(EXIT_INVALID) from None
    meta = job.get("metadata") or {}
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"

    try:
        members = load_members(kubeconfig)
    except MemberConfigError as exc:
        raise click.ClickException(str(exc)) from None
    placer = Placer()
    unreachable: dict[str, str] = {}
    try:
        for member in members.values():
            try:
                cap = MemberCapacity.from_lists(member.name, member.list_nodes(), member.list_pods())
            except MemberError as exc:
                unreachable[member.name] = str(exc)
                continue
            placer.add_member(cap)
    finally:
        for member in members.values():
            member.close()

    strategy: Strategy = "spread" if policy == "spread" else "pack"
    placement = placer.decide(demand, strategy=strategy)
    explained = placer.explain(demand)
    reasons = {line.split(": ", 1)[0]: line for line in explained}
    if placement is not None:
        rows = ", ".join(f"{node} ({rtype}{f' x{n}' if n > 1 else ''})" for node, rtype, n in placement.rows)
        click.echo(f"{name} fits on {placement.member} ({policy}): {rows}")
    elif never_fits(explained) and not unreachable:
        click.echo(f"{name} can never fit on any member as the fleet is:")
    else:
        click.echo(f"{name} fits on no member:")
    for member_name in members:
        if member_name in unreachable:
            click.echo(f"  {member_name}: unreachable ({unreachable[member_name]})")
        else:
            click.echo(f"  {reasons[member_name]}")
    companions = _companions(job, others)
    if companions:
        click.echo("with:")
        for line in companions:
            click.echo(line)
    raise SystemExit(EXIT_FITS if placement is not None else EXIT_NO_FIT)
