"""``fleet quota``: check, apply and look at the ElasticQuotaTree.

``validate`` needs nothing but the file, so an admin (or CI) can check a tree before it goes
anywhere. ``apply`` goes through the fleet endpoint (the kubeconfig's ``fleet`` context), like
``kubectl apply``: the endpoint checks the admin's token, stores the object and applies it to the
ledger, so every replica and ``kubectl get elasticquotatree`` see it. With ``--redis`` it writes
the ledger directly instead (bootstrapping, or repair while no endpoint runs); ``queues`` reads
the ledger (``--redis`` or ``FLEET_REDIS_URL``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import redis
import yaml
from kubernetes.client.exceptions import ApiException

from fleet.cli.client import (
    REQUEST_TIMEOUT,
    EndpointError,
    as_dict,
    connect,
    context_option,
    endpoint_errors,
    kubeconfig_path_option,
    warnings_of,
)
from fleet.cli.options import fleet_redis, fleet_redis_option, key_prefix_option, redis_url_checked
from fleet.connections import ONE_SHOT_RETRIES, mask_url, redis_from_url
from fleet.kinds import ELASTIC_QUOTA_TREE, tree_version
from queues import (
    TREE_NAMESPACE,
    ApplyRefused,
    Keys,
    KeySpace,
    Ledger,
    Severity,
    TreeInvalid,
    check,
    format_views,
    load,
    queue_views,
)

__all__ = ["quota"]

_FILE = click.option(
    "-f",
    "--filename",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The ElasticQuotaTree YAML.",
)


@click.group()
def quota() -> None:
    """Work with the ElasticQuotaTree."""


def _report(path: Path) -> bool:
    """Print every problem of the file; True when none is an error."""
    _, problems = check(path.read_text(encoding="utf-8"))
    for problem in problems:
        click.echo(f"{problem.severity}: {problem}", err=problem.severity is Severity.ERROR)
    return not any(p.severity is Severity.ERROR for p in problems)


@quota.command()
@_FILE
def validate(path: Path) -> None:
    """Check a tree: errors and warnings, exit 1 when there is an error."""
    if not _report(path):
        raise SystemExit(1)
    click.echo(f"{path}: valid")


@quota.command()
@_FILE
@click.option(
    "--redis",
    "redis_url",
    default=None,
    callback=redis_url_checked,
    help="Apply straight to the quota ledger in this Redis instead of through the fleet endpoint.",
)
@key_prefix_option
@kubeconfig_path_option
@context_option
@click.option("--expected-version", type=int, default=None, help="Refuse unless this version is applied.")
def apply(
    *,
    path: Path,
    redis_url: str | None,
    space: KeySpace,
    kubeconfig: Path,
    context: str,
    expected_version: int | None,
) -> None:
    """Make a tree the quota tree, keeping the usage of running jobs (through the fleet endpoint)."""
    if redis_url is None:
        _apply_through_endpoint(path, kubeconfig, context, expected_version)
        return
    if not _report(path):
        raise SystemExit(1)
    tree, _ = load(path.read_text(encoding="utf-8"))
    client = redis_from_url(redis_url, retries=ONE_SHOT_RETRIES)
    try:
        applied = Ledger(client, Keys.within(space)).apply(tree, expected_version=expected_version)
    except (ApplyRefused, TreeInvalid) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    except redis.RedisError as exc:
        click.echo(f"error: redis at {mask_url(redis_url)}: {exc}", err=True)
        raise SystemExit(1) from None
    finally:
        client.close()
    state = "applied" if applied.changed else "unchanged"
    click.echo(f"elasticquotatree {state}, version {applied.version}")


def _tree_document(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise EndpointError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict) or document.get("kind") != ELASTIC_QUOTA_TREE.kind:
        raise EndpointError(f"{path}: not an {ELASTIC_QUOTA_TREE.kind}")
    meta = document.setdefault("metadata", {})
    if not isinstance(meta, dict) or not meta.get("name"):
        raise EndpointError(f"{path}: metadata.name: Required value")
    meta.setdefault("namespace", TREE_NAMESPACE)
    return document


def _apply_through_endpoint(path: Path, kubeconfig: Path, context: str, expected: int | None) -> None:
    """Create the tree, or replace it at the version read (a concurrent change is a conflict)."""
    document = _tree_document(path)
    meta = document["metadata"]
    rt = ELASTIC_QUOTA_TREE
    endpoint = connect(kubeconfig, context)
    try:
        with endpoint_errors(endpoint.server):
            custom = endpoint.custom
            try:
                current: dict[str, Any] | None = as_dict(
                    custom.get_namespaced_custom_object(
                        rt.group,
                        rt.version,
                        meta["namespace"],
                        rt.plural,
                        meta["name"],
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            except ApiException as error:
                if error.status != 404:
                    raise
                current = None
            version = tree_version(current)
            if expected is not None and expected != version:
                raise EndpointError(f"the applied tree is version {version}, not {expected}")
            if current is not None and current.get("spec") == document.get("spec"):
                click.echo(f"elasticquotatree unchanged, version {version}")
                return
            if current is None:
                stored, _, headers = custom.create_namespaced_custom_object_with_http_info(
                    rt.group,
                    rt.version,
                    meta["namespace"],
                    rt.plural,
                    document,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            else:
                meta["resourceVersion"] = current["metadata"]["resourceVersion"]
                meta.setdefault("annotations", current["metadata"].get("annotations") or {})
                stored, _, headers = custom.replace_namespaced_custom_object_with_http_info(
                    rt.group,
                    rt.version,
                    meta["namespace"],
                    rt.plural,
                    meta["name"],
                    document,
                    _request_timeout=REQUEST_TIMEOUT,
                )
    finally:
        endpoint.close()
    for text in warnings_of(headers):
        click.echo(f"warning: {text}")
    version = tree_version(as_dict(stored))
    click.echo(f"elasticquotatree applied, version {version}")


@quota.command()
@fleet_redis_option
@key_prefix_option
def queues(redis_url: str | None, up_state_dir: Path, space: KeySpace) -> None:
    """The queue of every tree node with its usage, admitted and pending jobs."""
    redis_url = fleet_redis(redis_url, up_state_dir)
    client = redis_from_url(redis_url, retries=ONE_SHOT_RETRIES)
    try:
        click.echo(format_views(queue_views(Ledger(client, Keys.within(space)))))
    except redis.RedisError as exc:
        click.echo(f"error: redis at {mask_url(redis_url)}: {exc}", err=True)
        raise SystemExit(1) from None
    finally:
        client.close()
