"""The real kubectl, run against a test server with its own kubeconfig and discovery cache."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["KUBECTL", "Kubectl", "require_kubectl", "table"]

KUBECTL = shutil.which("kubectl")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_kubectl() -> str:
    """The kubectl binary; a missing one fails in CI and skips elsewhere."""
    if KUBECTL is None:
        if IN_CI:
            pytest.fail("kubectl is not installed; CI must run the kubectl tests")
        pytest.skip("kubectl is not installed")
    return KUBECTL


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path, cache: Path) -> None:
        self.base = [binary, f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}"]

    def __call__(
        self, *args: str, ok: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, input=stdin, timeout=30, check=False
        )
        if ok and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done


def table(output: str) -> list[list[str]]:
    """kubectl's table output as rows of cells (header first)."""
    return [line.split() for line in output.splitlines() if line.strip()]
