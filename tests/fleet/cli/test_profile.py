"""``FLEET_PROFILE``: a role's CPU profile, for finding where a job's milliseconds go (issue 30)."""

from __future__ import annotations

import os
import pstats
import subprocess
import sys
from pathlib import Path


def test_a_command_run_with_fleet_profile_leaves_its_profile_when_it_exits(tmp_path: Path) -> None:
    where = tmp_path / "profiles"
    done = subprocess.run(
        [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "get", "--help"],
        env={**os.environ, "FLEET_PROFILE": str(where)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Usage" in done.stdout
    (profile,) = where.glob("get-*.prof")
    stats = pstats.Stats(str(profile))
    assert any("fleet/cli" in filename for filename, _, _ in stats.stats)  # type: ignore[attr-defined]


def test_without_fleet_profile_nothing_is_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_PROFILE"}
    subprocess.run(
        [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "get", "--help"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert list(tmp_path.iterdir()) == []
