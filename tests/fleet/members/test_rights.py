"""The member ClusterRole grants exactly what Fleet's member access calls, derived from the code.

Every ``kubernetes`` client call in :mod:`fleet.members.access` (``self._core.X``,
``self._custom.X``, and ``getattr(self._core, f"X_{suffix}")`` for the ConfigMaps, Secrets and
Services a job references) is mapped to the verb and resource it needs, a custom-object call to
every job kind of the registry; the set must equal :func:`fleet.members.rights.rights`, so a call
added without its right, or a right left behind by a call removed, fails here.
``deploy/member/fleet-member.yaml`` must be ``fleet member rbac``'s output.
"""

from __future__ import annotations

import ast
import re
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
    "read": ("get",),
    "get": ("get",),
    "create": ("create",),
    "delete": ("delete",),
    "list": ("list", "watch"),
    "patch": ("patch",),
    "replace": ("update",),
}
JOB_KINDS = [(adapter.resource.group, adapter.resource.plural) for adapter in KINDS]
# The custom objects Fleet makes in a member: the jobs, and Kubeflow Trainer's namespaced runtime.
JOB_KINDS += [(rt.group, rt.plural) for rt in RUNTIME_KINDS if rt.namespaced]
_RESOURCES: dict[str, list[tuple[str, str]]] = {
    "namespace": [("", "namespaces")],
    "node": [("", "nodes")],
    "pod": [("", "pods")],
    "custom_object": JOB_KINDS,
}
#: The calls named at run time (``getattr(self._core, f"read_namespaced_{suffix}")``): the kinds
#: ``_CORE_SUFFIXES`` in fleet.members.access names.
_COMPANIONS = [("", "configmaps"), ("", "secrets"), ("", "services")]


def _needed() -> set[tuple[str, str, str]]:
    """(group, resource, verb) for each client call of a Member method (the roles call every one).

    ``list`` brings ``watch``: the watcher opens its stream with the same list function."""
    tree = ast.parse(ACCESS.read_text())
    member = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Member")
    needed: set[tuple[str, str, str]] = set()
    for method in member.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and isinstance(node.args[0], ast.Attribute)
                and node.args[0].attr == "_core"
            ):
                name = node.args[1]
                assert isinstance(name, ast.JoinedStr) and isinstance(name.values[0], ast.Constant)
                prefix = str(name.values[0].value)
                match = re.fullmatch(r"(read|create|delete|replace)_namespaced_", prefix)
                assert match, f"Member.{method.name}: client call {prefix}... is not mapped to a verb"
                needed |= {(g, r, v) for g, r in _COMPANIONS for v in _VERBS[match.group(1)]}
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in {"_core", "_custom"}
            ):
                match = re.fullmatch(r"(read|get|create|delete|list|patch|replace)_(.+)", node.attr)
                assert match, f"Member.{method.name}: client call {node.attr} is not mapped to a verb"
                verb, rest = match.groups()
                rest = re.sub(r"^namespaced_|_for_all_namespaces$", "", rest)
                assert rest in _RESOURCES, f"Member.{method.name}: client call {node.attr}: unknown resource"
                needed |= {(g, r, v) for g, r in _RESOURCES[rest] for v in _VERBS[verb]}
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
