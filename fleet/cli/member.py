"""``fleet member``: what an admin does to a member cluster (its RBAC manifest, for now)."""

from __future__ import annotations

import click
import yaml

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
    namespaces, nodes, pods and the job kinds (deploy/member/fleet-member.yaml is this output).
    """
    from fleet.members.rights import member_manifest

    click.echo(yaml.safe_dump_all(member_manifest(namespace, service_account), sort_keys=False), nl=False)
