"""The member ClusterRole grants exactly what Fleet's member access calls, derived from the code.

Every member call in :mod:`fleet.members.access` (``self._rest.VERB(RESOURCE, ...)``, through
:mod:`fleet.members.rest`) is mapped to the verb and resource it needs: its resource argument is
a constant (``NAMESPACES``), a job kind (``kind``), a ConfigMap, Secret or Service a job
references (``companion``), or what ``list_objects`` lists (``resource``: a job kind, nodes,
pods); the set must equal :func:`fleet.members.rights.rights`, so a call added without its right,
or a right left behind by a call removed, fails here.
``deploy/member/fleet-member.yaml`` must be ``fleet member rbac``'s output.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml
from click.testing import CliRunner

import fleet.members.access
from fleet.cli import main
from fleet.members.rights import member_manifest, rights
from fleet.workloads import KINDS, RUNTIME_KINDS

ROOT = Path(__file__).resolve().parents[3]
ACCESS = Path(fleet.members.access.__file__)
_VERBS = {
    "get": ("get",),
    "create": ("create",),
    "delete": ("delete",),
    "list": ("list", "watch"),
    "replace": ("update",),
}
JOB_KINDS = [(adapter.resource.group, adapter.resource.plural) for adapter in KINDS]
# The custom objects Fleet makes in a member: the jobs, and Kubeflow Trainer's namespaced runtime.
JOB_KINDS += [(rt.group, rt.plural) for rt in RUNTIME_KINDS if rt.namespaced]
#: What a call's resource argument names (see the module's docstring).
_RESOURCES: dict[str, list[tuple[str, str]]] = {
    "NAMESPACES": [("", "namespaces")],
    "kind": JOB_KINDS,
    "companion": [("", "configmaps"), ("", "secrets"), ("", "services")],
    "resource": [*JOB_KINDS, ("", "nodes"), ("", "pods")],
}


def _needed() -> set[tuple[str, str, str]]:
    """(group, resource, verb) for each member call of a Member method (the roles call every one).

    ``list`` brings ``watch``: the watcher opens its stream with the same call (``watch=true``)."""
    tree = ast.parse(ACCESS.read_text())
    member = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Member")
    needed: set[tuple[str, str, str]] = set()
    calls = 0
    for method in member.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "_rest"
            ):
                assert node.attr in _VERBS, f"Member.{method.name}: call {node.attr} is not mapped to a verb"
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "_rest"
            ):
                continue
            target = node.args[0]
            assert isinstance(target, ast.Name) and target.id in _RESOURCES, (
                f"Member.{method.name}: {node.func.attr}({ast.unparse(target)}, ...) names no known resource"
            )
            needed |= {(g, r, v) for g, r in _RESOURCES[target.id] for v in _VERBS[node.func.attr]}
            calls += 1
    assert calls >= 10, "the member calls are no longer written as self._rest.VERB(...)"
    return needed


def test_the_rights_are_exactly_the_calls_fleet_makes() -> None:
    granted = {(r.group, r.resource, verb) for r in rights(JOB_KINDS) for verb in r.verbs}
    assert granted == _needed()
    assert {("kubeflow.org", "pytorchjobs", "create"), ("", "secrets", "update")} <= granted


def test_the_member_manifest_in_deploy_is_fleet_member_rbac_output() -> None:
    printed = CliRunner().invoke(main, ["member", "rbac"])
    assert printed.exit_code == 0, printed.output
    assert list(yaml.safe_load_all(printed.output)) == member_manifest(JOB_KINDS)
    on_disk = list(yaml.safe_load_all((ROOT / "deploy" / "member" / "fleet-member.yaml").read_text()))
    assert on_disk == member_manifest(JOB_KINDS)


def test_the_cluster_role_updates_nothing_but_what_fleet_makes_beside_jobs() -> None:
    role = next(d for d in member_manifest(JOB_KINDS) if d["kind"] == "ClusterRole")
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs <= {"get", "list", "watch", "create", "delete", "update"}
    updated = {res for rule in role["rules"] if "update" in rule["verbs"] for res in rule["resources"]}
    assert updated == {"configmaps", "secrets", "services"}
    assert not any("*" in rule.get("resources", []) + rule.get("apiGroups", []) for rule in role["rules"])
