"""``fleet member``: an admin's member clusters: the RBAC to apply in one, and registering or
removing one in the members' Secret of the fleet's own cluster (:mod:`fleet.members.secret`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click
import yaml

from fleet.cli.options import key_prefix_option, redis_option
from queues import KeySpace

__all__ = ["member"]


@click.group()
def member() -> None:
    """Prepare member clusters for Fleet."""


@member.command()
@click.option(
    "--namespace", default="fleet-system", show_default=True, help="Namespace of the ServiceAccount."
)
@click.option("--service-account", default="fleet", show_default=True, help="ServiceAccount Fleet acts as.")
def rbac(*, namespace: str, service_account: str) -> None:
    """Print the least-privilege RBAC to apply in a member (kubectl apply -f -).

    A ServiceAccount with a token, and a ClusterRole granting exactly the verbs Fleet uses on
    namespaces, nodes, pods, the job kinds and the objects jobs reference (ConfigMaps, Secrets,
    Services) (deploy/member/fleet-member.yaml is this output).
    """
    from fleet.members import member_manifest
    from fleet.workloads import KINDS

    kinds = [(adapter.resource.group, adapter.resource.plural) for adapter in KINDS]
    manifest = member_manifest(kinds, namespace, service_account)
    click.echo(yaml.safe_dump_all(manifest, sort_keys=False), nl=False)


def _cluster_options(f: Any) -> Any:
    """Where the fleet runs: the cluster holding the members' Secret."""
    f = click.option(
        "--secret", default="fleet-members", show_default=True, help="Secret holding the members' kubeconfig."
    )(f)
    f = click.option("--namespace", default="fleet-system", show_default=True, help="Fleet's namespace.")(f)
    f = click.option(
        "--cluster-context", default=None, help="Context of --cluster-kubeconfig (its current one)."
    )(f)
    return click.option(
        "--cluster-kubeconfig",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig of the cluster Fleet runs in (default: $KUBECONFIG or ~/.kube/config).",
    )(f)


def _secret(cluster_kubeconfig: Path | None, cluster_context: str | None, namespace: str, name: str) -> Any:
    from kubernetes.config import new_client_from_config
    from kubernetes.config.config_exception import ConfigException

    from fleet.members import MemberSecret

    try:
        client = new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster_kubeconfig) if cluster_kubeconfig else None, context=cluster_context
        )
    except (ConfigException, OSError) as error:
        raise click.ClickException(f"the fleet's cluster: {error}") from None
    return MemberSecret(client, namespace, name)


@member.command()
@click.argument("name")
@click.option(
    "--kubeconfig",
    "member_kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A kubeconfig that reaches the member (as Fleet's ServiceAccount: deploy/member).",
)
@click.option("--context", default=None, help="Its context for the member (default: its current one).")
@_cluster_options
def add(
    *,
    name: str,
    member_kubeconfig: Path,
    context: str | None,
    cluster_kubeconfig: Path | None,
    cluster_context: str | None,
    namespace: str,
    secret: str,
) -> None:
    """Register member NAME: check that Fleet reaches it with these credentials, then store them
    in the members' Secret. The running roles take it up once the kubelet refreshes the mounted
    Secret (about a minute), without a restart."""
    from kubernetes.client import CoreV1Api

    from fleet.members import (
        MemberConfigError,
        SecretError,
        load_members,
        member_entry,
        members_of,
        with_member,
    )

    try:
        entry = member_entry(member_kubeconfig, context, name)
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "member"
        path.write_text(yaml.safe_dump(entry))
        try:
            loaded = load_members(path)
        except MemberConfigError as error:
            raise click.ClickException(str(error)) from None
        reached = loaded[name]
        try:
            probe = reached.probe()
            if not probe.healthy:
                raise click.ClickException(f"member {name}: not reachable ({probe.error}); nothing stored")
            try:
                CoreV1Api(reached.api_client).list_node(limit=1, _request_timeout=10)
            except Exception as error:  # a 403 says the ClusterRole is missing
                status = getattr(error, "status", None)
                raise click.ClickException(
                    f"member {name}: cannot list nodes ({status or type(error).__name__}): apply "
                    "deploy/member/fleet-member.yaml there; nothing stored"
                ) from None
        finally:
            reached.close()
    store = _secret(cluster_kubeconfig, cluster_context, namespace, secret)
    try:
        config, version = store.read()
        replaced = name in members_of(config or {})
        store.write(with_member(config, entry), version)
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"member {name} {'updated' if replaced else 'added'} in secret {namespace}/{secret}")


@member.command()
@click.argument("name")
@redis_option
@key_prefix_option
@click.option("--force", is_flag=True, help="Requeue the member's jobs instead of refusing while it has any.")
@_cluster_options
def remove(
    *,
    name: str,
    redis_url: str,
    space: KeySpace,
    force: bool,
    cluster_kubeconfig: Path | None,
    cluster_context: str | None,
    namespace: str,
    secret: str,
) -> None:
    """Take member NAME out of the fleet: refused while jobs are placed there, unless --force,
    which first sends each back to its queue (ClusterFailover, the member avoided) to run elsewhere.
    The running roles let it go once the kubelet refreshes the mounted Secret, without a restart."""
    from fleet.connections import ONE_SHOT_RETRIES, redis_from_url
    from fleet.members import SecretError, members_of, without_member

    store = _secret(cluster_kubeconfig, cluster_context, namespace, secret)
    try:
        config, version = store.read()
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    if config is None or name not in members_of(config):
        raise click.ClickException(f"member {name}: not in secret {namespace}/{secret}")
    client = redis_from_url(redis_url, retries=ONE_SHOT_RETRIES)
    try:
        placed = _placed_on(client, space, name)
        if placed and not force:
            shown = ", ".join(key for key, _uid, _attempt in placed[:5]) + (" ..." if len(placed) > 5 else "")
            raise click.ClickException(
                f"member {name} has {len(placed)} job(s) placed: {shown}; wait for them, or --force "
                "to requeue them"
            )
        requeued = _requeue(client, space, name, placed)
    finally:
        client.close()
    try:
        store.write(without_member(config, name), version)
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"member {name} removed from secret {namespace}/{secret}; {requeued} job(s) requeued")
    if requeued:
        click.echo(
            f"their copies in {name} are not deleted by Fleet once it is gone: delete them there "
            "(label fleet.io/job-uid)"
        )


def _placed_on(client: Any, space: KeySpace, member_name: str) -> list[tuple[str, str, int]]:
    """(job key, uid, attempt) of the unfinished jobs whose current attempt is on the member."""
    from fleet.jobs import FINISHED, Phase, attempt_of, cluster_of, current_state, job_key, list_jobs
    from fleet.state import Objects, StateKeys

    items, _ = list_jobs(Objects(client, StateKeys.within(space)))
    return [
        (job_key(obj), str(obj["metadata"]["uid"]), attempt_of(obj))
        for obj in items
        if cluster_of(obj) == member_name and current_state(obj) not in (Phase.QUEUED, *FINISHED)
    ]


def _requeue(client: Any, space: KeySpace, member_name: str, placed: list[tuple[str, str, int]]) -> int:
    from fleet.dispatch import EXCLUDE_DOWN_SECONDS, Context, give_back
    from fleet.jobs import FleetReason

    ctx = Context(client, None, space)
    done = 0
    for key, uid, attempt in placed:
        outcome = give_back(
            ctx, key, uid, attempt, member=member_name, reason=FleetReason.CLUSTER_FAILOVER,
            message=f"{member_name} is being removed from the fleet", exclude_for=EXCLUDE_DOWN_SECONDS,
            gives_way=False, count_failure=False,
        )  # fmt: skip
        done += int(outcome.changed)
    return done
