"""Following the members' kubeconfig: when a role reloads its members, and what it takes as changed."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context
from fleet.members import MemberConfigError
from fleet.members.changes import KubeconfigChanges, MemberChanges
from fleet.sim.kubeconfig import build_kubeconfig, write_atomically

SERVERS = {"member-1": "http://127.0.0.1:1", "member-2": "http://127.0.0.1:2"}


def _write(path: Path, servers: dict[str, str], **kwargs: Any) -> None:
    write_atomically(path, build_kubeconfig(servers, "http://127.0.0.1:9", **kwargs))


@pytest.fixture
def changes(tmp_path: Path) -> KubeconfigChanges:
    path = tmp_path / "kubeconfig"
    _write(path, SERVERS)
    followed = KubeconfigChanges(path)
    assert followed.poll() == MemberChanges(added=("member-1", "member-2"))
    followed.accept()
    return followed


def test_an_unchanged_file_is_not_reloaded(changes: KubeconfigChanges) -> None:
    assert changes.poll() is None
    _write(changes.path, SERVERS)  # written again the same: a new inode, the same content
    assert changes.poll() is None
    assert changes.members == ["member-1", "member-2"]


def test_members_added_removed_and_given_new_credentials(changes: KubeconfigChanges) -> None:
    _write(changes.path, {"member-2": "http://127.0.0.1:22", "member-3": "http://127.0.0.1:3"})
    assert changes.poll() == MemberChanges(added=("member-3",), removed=("member-1",), changed=("member-2",))
    changes.accept()
    assert changes.members == ["member-2", "member-3"]
    assert changes.poll() is None


def test_new_labels_change_a_member(changes: KubeconfigChanges) -> None:
    _write(changes.path, SERVERS, labels={"member-1": {"region": "north"}})
    assert changes.poll() == MemberChanges(changed=("member-1",))


@pytest.mark.parametrize(
    "broken",
    [
        "contexts: [{name: member-1, context: {cluster: member-1, user: u}\n",  # cut off mid-write
        "- just a list\n",
        "contexts: [{name: member-1, context: {cluster: nowhere, user: nobody}}]\n",
        "clusters: 3\n",
    ],
)
def test_a_broken_file_keeps_the_last_good_set(
    changes: KubeconfigChanges, broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    changes.path.write_text(broken)
    with caplog.at_level(logging.WARNING, logger="fleet.members"):
        assert changes.poll() is None
        assert changes.poll() is None
    assert [r.message.split(" error=")[0] for r in caplog.records] == ["event=members_not_reloaded kept=2"]
    assert changes.members == ["member-1", "member-2"]
    _write(changes.path, {"member-1": SERVERS["member-1"]})  # good again: compared with the last good set
    assert changes.poll() == MemberChanges(removed=("member-2",))


def test_a_rejected_version_is_not_tried_again_until_the_file_changes(changes: KubeconfigChanges) -> None:
    _write(changes.path, {**SERVERS, "member-3": "http://127.0.0.1:3"})
    assert changes.poll() == MemberChanges(added=("member-3",))
    changes.reject(MemberConfigError("context member-3: cannot build a client"))
    assert changes.poll() is None
    assert changes.members == ["member-1", "member-2"]
    _write(changes.path, {**SERVERS, "member-4": "http://127.0.0.1:4"})
    assert changes.poll() == MemberChanges(added=("member-4",))


def test_a_secret_volume_swap_is_seen(tmp_path: Path) -> None:
    """The kubelet updates a mounted Secret by pointing ``..data`` at a new directory."""
    for version, servers in (("..v1", SERVERS), ("..v2", {"member-1": "http://127.0.0.1:11"})):
        _write(tmp_path / version / "kubeconfig", servers)
    (tmp_path / "..data").symlink_to("..v1")
    (tmp_path / "kubeconfig").symlink_to("..data/kubeconfig")
    followed = KubeconfigChanges(tmp_path / "kubeconfig")
    assert followed.poll() == MemberChanges(added=("member-1", "member-2"))
    followed.accept()
    os.symlink("..v2", tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    assert followed.poll() == MemberChanges(removed=("member-2",), changed=("member-1",))


def test_a_missing_file_fails_at_start_only(tmp_path: Path) -> None:
    followed = KubeconfigChanges(tmp_path / "absent")
    with pytest.raises(MemberConfigError, match="absent: no such file"):
        followed.poll(strict=True)
    assert followed.poll() is None


def test_the_context_swaps_its_members_and_closes_the_old_clients_after_the_role(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    _write(path, SERVERS)
    ctx = Context(redis.Redis(port=1), path)  # no Redis call is made
    before = dict(ctx.members)
    closed: list[str] = []
    for member in before.values():
        member.close = functools.partial(closed.append, member.name)  # type: ignore[method-assign]
    seen: list[tuple[MemberChanges, list[str], list[str]]] = []

    def apply(change: MemberChanges) -> None:
        seen.append((change, sorted(ctx.members), list(closed)))

    assert ctx.refresh_members(apply) is None
    _write(path, {"member-2": "http://127.0.0.1:22", "member-3": "http://127.0.0.1:3"})
    change = ctx.refresh_members(apply)
    assert change == MemberChanges(added=("member-3",), removed=("member-1",), changed=("member-2",))
    assert seen == [(change, ["member-2", "member-3"], [])]  # the role acts before any client closes
    assert sorted(closed) == ["member-1", "member-2"]
    assert ctx.members["member-2"] is not before["member-2"]
    assert ctx.members["member-2"].server == "http://127.0.0.1:22"
    path.write_text("contexts: [")  # half written
    assert ctx.refresh_members(apply) is None
    assert sorted(ctx.members) == ["member-2", "member-3"]
