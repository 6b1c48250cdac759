"""The API's member names follow the kubeconfig as the roles do (:class:`KubeconfigChanges`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fleet.endpoint.members import members_from
from fleet.members import MemberConfigError
from fleet.sim.kubeconfig import build_kubeconfig, write_atomically


def _write(path: Path, *names: str) -> None:
    write_atomically(path, build_kubeconfig({n: "http://127.0.0.1:1" for n in names}, "http://127.0.0.1:9"))


def test_the_names_follow_the_file_and_survive_a_broken_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kubeconfig"
    _write(path, "member-2", "member-1")
    names = members_from(path)
    assert names() == ["member-1", "member-2"]
    _write(path, "member-1", "member-3")
    assert names() == ["member-1", "member-3"]
    path.write_text("contexts: [")  # not YAML
    with caplog.at_level(logging.WARNING):
        assert names() == ["member-1", "member-3"]
        assert names() == ["member-1", "member-3"]
    assert [r.message.split(" error=")[0] for r in caplog.records] == ["event=members_not_reloaded kept=2"]


def test_a_wrong_path_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(MemberConfigError, match="no such file"):
        members_from(tmp_path / "absent")


def test_no_kubeconfig_no_members() -> None:
    assert members_from(None)() == []
