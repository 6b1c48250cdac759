"""``fleet up``'s token file and kubeconfig: an admin and a tenant context, and the tokens a user
added kept across starts (issue 33, req. 5)."""

from __future__ import annotations

from pathlib import Path

import yaml

from fleet.endpoint.auth import load_token_file
from fleet.local.kubeconfig import fleet_kubeconfig
from fleet.local.up import write_tokens
from fleet.members import KubeconfigClients


def test_fleet_up_rewrites_its_own_tokens_and_keeps_the_users(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    write_tokens(path, "admin-1", "tenant-1")
    with path.open("a") as out:
        out.write('bob-token,bob,bob,"namespace:team-b"\n')
    write_tokens(path, "admin-2", "tenant-2")
    tokens = load_token_file(path)
    assert {token: (i.user, sorted(i.groups)) for token, i in tokens.items()} == {
        "admin-2": ("fleet-admin", ["fleet:admins"]),
        "tenant-2": ("team-a", ["namespace:default"]),
        "bob-token": ("bob", ["namespace:team-b"]),
    }
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_tenant_context_is_the_fleet_under_another_user_not_a_member(tmp_path: Path) -> None:
    members = {
        "clusters": [{"name": "member-1", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "member-1-admin", "user": {"token": "t"}}],
        "contexts": [{"name": "member-1", "context": {"cluster": "member-1", "user": "member-1-admin"}}],
    }
    config = fleet_kubeconfig(
        "https://127.0.0.1:2", "admin", members, state_dir=tmp_path, tenant_token="tenant"
    )
    contexts = {c["name"]: c["context"] for c in config["contexts"]}
    assert contexts["team-a"] == {"cluster": "fleet", "user": "team-a", "namespace": "default"}
    path = tmp_path / "fleet.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    assert KubeconfigClients(path).members() == ["member-1"]
