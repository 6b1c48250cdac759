"""No module outside the workload adapters names a specific job kind (issue 19's seam).

Kinds are adapters listed in :mod:`fleet.workloads.registry`; everything else iterates that list.
Allowed to name kinds: ``fleet/workloads`` (the adapters), ``fleet/ascend.py``,
``fleet/kubeflow.py`` and ``fleet/t9k.py`` (the upstream vocabularies), ``fleet/sim`` (the
simulated controllers, one per kind), ``fleet/state/wire.py`` (its compression dictionary is
trained on a sample job) and ``fleet/local/up.py`` (the walkthrough it prints names the sample's
kind). Docstrings and comments may use kinds as examples; code may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = (
    "fleet/workloads/",
    "fleet/ascend.py",
    "fleet/kubeflow.py",
    "fleet/t9k.py",
    "fleet/sim/",
    "fleet/state/wire.py",
    "fleet/local/up.py",
)
KIND_WORDS = re.compile(
    r"ascendjob|acjob|mindxdl|pytorchjob|tfjob|mpijob|tensorflowtrainingjob|kubeflow\.org|tensorstack",
    re.IGNORECASE,
)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _kind_names(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.alias):
            text = node.asname or node.name
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = node.name
        if text is not None and KIND_WORDS.search(text):
            hits.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}: {text[:60]!r}")
    return hits


def test_only_the_adapters_name_a_job_kind() -> None:
    hits = []
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if not relative.startswith(ALLOWED):
            hits += _kind_names(path)
    assert hits == []


def test_the_check_sees_a_kind_named_in_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""AscendJob in a docstring is fine."""\nKIND = "PyTorchJob"\nFLEET_ASCENDJOB = 1\n')
    hits = _kind_names(module, tmp_path)
    assert [h.split(": ", 1)[1] for h in hits] == ["'PyTorchJob'", "'FLEET_ASCENDJOB'"]

