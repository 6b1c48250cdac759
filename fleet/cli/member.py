"""``fleet member``: an admin's member clusters: the RBAC to apply in one, registering or removing
one in the members' Secret of the fleet's own cluster (:mod:`fleet.members.secret`) or in the
members file of a running ``fleet up``, and taking one out of service (``cordon``, ``drain``,
``uncordon``: :mod:`fleet.state.member_taints`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import click
import yaml

from fleet.cli.options import fleet_redis, fleet_redis_option, key_prefix_option
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
    from fleet.workloads import KINDS, RUNTIME_KINDS

    kinds = [(adapter.resource.group, adapter.resource.plural) for adapter in KINDS]
    # A member gets a TrainJob's training runtime before the job, as a namespaced object.
    kinds += [(rt.group, rt.plural) for rt in RUNTIME_KINDS if rt.namespaced]
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


class _LocalMembers:
    """The members of a running ``fleet up``: the kubeconfig its roles follow
    (``members.kubeconfig`` in its state directory), read and written as the Secret is in a
    cluster (a version to write against; a change meanwhile is a conflict)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = f"the local fleet's members ({path})"

    def read(self) -> tuple[dict[str, Any] | None, str | None]:
        from fleet.members import SecretError

        try:
            text = self.path.read_text(encoding="utf-8")
            version = str(self.path.stat().st_mtime_ns)
        except OSError as error:
            raise SecretError(f"{self.where}: {error.strerror or error}") from None
        config = yaml.safe_load(text) or None
        return (config if isinstance(config, dict) else None), version

    def write(self, config: dict[str, Any], version: str | None) -> None:
        from fleet.members import SecretError

        if version is not None and str(self.path.stat().st_mtime_ns) != version:
            raise SecretError(f"{self.where}: changed meanwhile; run the command again")
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        scratch.chmod(0o600)
        scratch.replace(self.path)  # atomic: the roles never read half a file


class _SecretMembers:
    def __init__(self, store: Any, namespace: str, name: str) -> None:
        self.store = store
        self.where = f"secret {namespace}/{name}"

    def read(self) -> tuple[dict[str, Any] | None, str | None]:
        result: tuple[dict[str, Any] | None, str | None] = self.store.read()
        return result

    def write(self, config: dict[str, Any], version: str | None) -> None:
        self.store.write(config, version)


def _kubeconfig_path(cluster_kubeconfig: Path | None) -> Path:
    if cluster_kubeconfig is not None:
        return cluster_kubeconfig
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(env) if env else Path.home() / ".kube" / "config"


def _members_store(
    cluster_kubeconfig: Path | None, cluster_context: str | None, namespace: str, name: str
) -> _LocalMembers | _SecretMembers:
    """Where the fleet that the kubeconfig points at keeps its members: a running ``fleet up``'s
    members file, or the Secret in the cluster Fleet runs in; refused, saying why, when the
    kubeconfig points at a fleet endpoint that is neither (the endpoint serves Secrets of its
    own, for jobs: a member written there would reach no role)."""
    from kubernetes.config import new_client_from_config
    from kubernetes.config.config_exception import ConfigException

    from fleet.kinds import FLEET_GROUP
    from fleet.local import Layout, local_fleet, running_redis_url
    from fleet.members import MemberSecret

    path = _kubeconfig_path(cluster_kubeconfig)
    state_dir = local_fleet(path, cluster_context)
    if state_dir is not None:
        if running_redis_url(state_dir) is None:
            raise click.ClickException(
                f"{path} points at the fleet of a `fleet up` with state directory {state_dir}, which "
                "is not running: start it first (its members are those of its run)"
            )
        return _LocalMembers(Layout(state_dir).members_kubeconfig)
    try:
        client = new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=cluster_context
        )
    except (ConfigException, OSError) as error:
        raise click.ClickException(f"the fleet's cluster: {error}") from None
    try:
        request = client.param_serialize(
            method="GET", resource_path=f"/apis/{FLEET_GROUP}", auth_settings=["BearerToken"]
        )
        answer = client.call_api(*request, _request_timeout=10)
        answer.read()
        serves_fleet = answer.status == 200
    except Exception:  # unreachable, or no such group: the cluster's own answer comes with the Secret
        serves_fleet = False
    if serves_fleet:
        raise click.ClickException(
            f"{path} (context {cluster_context or 'current'}) points at a fleet endpoint, not at the "
            f"cluster Fleet runs in: give --cluster-kubeconfig/--cluster-context of the cluster holding "
            f"secret {namespace}/{name}"
        )
    return _SecretMembers(MemberSecret(client, namespace, name), namespace, name)


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

    store = _members_store(cluster_kubeconfig, cluster_context, namespace, secret)
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
    try:
        config, version = store.read()
        replaced = name in members_of(config or {})
        store.write(with_member(config, entry), version)
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"member {name} {'updated' if replaced else 'added'} in {store.where}")


@member.command()
@click.argument("name")
@fleet_redis_option
@key_prefix_option
@click.option("--force", is_flag=True, help="Requeue the member's jobs instead of refusing while it has any.")
@_cluster_options
def remove(
    *,
    name: str,
    redis_url: str | None,
    up_state_dir: Path,
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

    store = _members_store(cluster_kubeconfig, cluster_context, namespace, secret)
    if redis_url is None and isinstance(store, _LocalMembers):
        redis_url = fleet_redis(None, store.path.parent)  # the local fleet's own Redis
    redis_url = fleet_redis(redis_url, up_state_dir)
    try:
        config, version = store.read()
    except SecretError as error:
        raise click.ClickException(str(error)) from None
    if config is None or name not in members_of(config):
        raise click.ClickException(f"member {name}: not in {store.where}")
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
    click.echo(f"member {name} removed from {store.where}; {requeued} job(s) requeued")
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
    from fleet.jobs import Attempt, Ending, FleetReason

    ctx = Context(client, None, space)
    done = 0
    for key, uid, attempt in placed:
        outcome = give_back(
            ctx, key, Attempt(uid, attempt, member_name), reason=FleetReason.CLUSTER_FAILOVER,
            message=f"{member_name} is being removed from the fleet",
            ending=Ending(exclude_for=EXCLUDE_DOWN_SECONDS, gives_way=False),
        )  # fmt: skip
        done += int(outcome.changed)
    return done


def _taint(
    name: str, redis_url: str | None, up_state_dir: Path, space: KeySpace, effects: tuple[str, ...]
) -> tuple[Any, Any]:
    """Set member NAME's taints in the fleet's Redis; the client and its dispatch keys."""
    from fleet.connections import ONE_SHOT_RETRIES, redis_from_url
    from fleet.local import local_fleet
    from fleet.state import DispatchKeys, read_health, write_taints

    if redis_url is None:  # the local fleet the kubeconfig points at, when there is one
        state_dir = local_fleet(_kubeconfig_path(None))
        if state_dir is not None:
            up_state_dir = state_dir
    client = redis_from_url(fleet_redis(redis_url, up_state_dir), retries=ONE_SHOT_RETRIES)
    keys = DispatchKeys.within(space)
    if name not in read_health(client, keys):
        client.close()
        raise click.ClickException(f"member {name}: not a member of this fleet (no health record)")
    write_taints(client, keys, name, effects)
    return client, keys


def _scheduling_options(f: Any) -> Any:
    f = key_prefix_option(f)
    f = fleet_redis_option(f)
    return click.argument("name")(f)


@member.command()
@_scheduling_options
def cordon(*, name: str, redis_url: str | None, up_state_dir: Path, space: KeySpace) -> None:
    """Take member NAME out of scheduling: no new job goes there; its running jobs stay
    (Karmada's taint cluster.karmada.io/unschedulable:NoSchedule, spec.taints of its MemberCluster)."""
    from fleet.state import NO_SCHEDULE

    client, _ = _taint(name, redis_url, up_state_dir, space, (NO_SCHEDULE,))
    client.close()
    click.echo(f"member {name} cordoned: no new jobs go there; its running jobs stay")


@member.command()
@_scheduling_options
def uncordon(*, name: str, redis_url: str | None, up_state_dir: Path, space: KeySpace) -> None:
    """Put member NAME back in scheduling (its taints removed)."""
    client, _ = _taint(name, redis_url, up_state_dir, space, ())
    client.close()
    click.echo(f"member {name} uncordoned: jobs may be placed there again")


@member.command()
@_scheduling_options
def drain(*, name: str, redis_url: str | None, up_state_dir: Path, space: KeySpace) -> None:
    """Cordon member NAME and move its jobs away as a cluster failover does (Karmada's NoExecute
    taint, which the dispatcher acts on as Karmada's taint manager does): each job's copy there is
    deleted first, then the job goes back to its queue (ClusterFailover, the member avoided) and is
    placed elsewhere, so it never runs twice."""
    from fleet.state import NO_EXECUTE, NO_SCHEDULE

    client, _ = _taint(name, redis_url, up_state_dir, space, (NO_SCHEDULE, NO_EXECUTE))
    try:
        placed = _placed_on(client, space, name)
    finally:
        client.close()
    click.echo(
        f"member {name} draining: cordoned; the dispatcher moves its {len(placed)} job(s): each copy "
        "there is deleted, then its job placed elsewhere"
    )
