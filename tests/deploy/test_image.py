"""The image's contents: Fleet's wheel alone, installed into a clean venv, runs every role.

``deploy/Dockerfile`` installs what ``make wheelhouse`` builds (Fleet's wheel, then its
dependencies' wheels) with ``--no-index``; this test does the same into a fresh venv without the
system's site-packages and without this checkout on ``sys.path``, so a module, a Lua script or a
dependency the wheel forgets fails here rather than in a cluster. Building a container is left to
``make image`` (no container engine is assumed at test time).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from fleet.cli import ROLES

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"

pytestmark = pytest.mark.integration


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel ``make wheelhouse`` built, the bin directory of a venv holding only it)."""
    base = tmp_path_factory.mktemp("image")
    dist = base / "dist"
    _run(["make", "-s", "wheelhouse", f"DIST={dist}", f"BIN={Path(sys.executable).parent}"], ROOT)
    wheels = sorted(dist.glob("fleet-*.whl"))
    assert len(wheels) == 1, wheels
    target = base / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(target)
    bin_dir = target / "bin"
    _run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(dist / "wheelhouse"),
            str(wheels[0]),
        ],
        base,
    )
    return wheels[0], bin_dir


def _clean_env(bin_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_role_runs_from_the_wheel_alone(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    _wheel, bin_dir = wheel_venv
    env = _clean_env(bin_dir)
    # Run from an empty directory: nothing of this checkout can be imported by accident.
    probe = "import fleet, queues; print(fleet.__file__, queues.__file__)"
    where = _run([str(bin_dir / "python"), "-c", probe], tmp_path, env)
    assert str(ROOT) not in where and str(bin_dir.parent) in where
    listed = _run([str(bin_dir / "fleet"), "--help"], tmp_path, env)
    for role in (*ROLES, "member"):
        assert re.search(rf"^\s+{role}\s", listed, re.MULTILINE), f"fleet --help does not list {role}"
        usage = _run([str(bin_dir / "fleet"), role, "--help"], tmp_path, env)
        assert usage.startswith(f"Usage: fleet {role} "), usage


def test_the_wheel_carries_every_data_file_of_the_packages(wheel_venv: tuple[Path, Path]) -> None:
    """Every file of ``fleet`` and ``queues`` that is not Python (the Lua scripts, the kinds'
    schemas, the type markers) is in the wheel: package data is listed by path in
    ``pyproject.toml``, so a package moved or renamed would otherwise ship without its data."""
    wheel, _bin = wheel_venv
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {
        path.relative_to(ROOT).as_posix()
        for package in ("fleet", "queues")
        for path in (ROOT / package).rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    kinds = {Path(name).suffix for name in data}
    assert {".lua", ".yaml", ".typed"} <= kinds, kinds
    assert data <= names, sorted(data - names)


def test_the_dockerfile_runtime_stage_is_non_root_and_runs_fleet() -> None:
    text = DOCKERFILE.read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)
    assert len(stages) == 3, "a build stage and a runtime stage"
    runtime = stages[-1]
    assert "--from=build" in runtime
    user = re.search(r"^USER (\d+):(\d+)$", runtime, re.MULTILINE)
    assert user is not None and int(user.group(1)) != 0 and int(user.group(2)) != 0
    assert re.search(r'^ENTRYPOINT \["fleet"\]$', runtime, re.MULTILINE)
    # No compiler or package build in the runtime stage: it only copies the built virtualenv.
    assert "pip wheel" not in runtime and "pip install" not in runtime
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime
