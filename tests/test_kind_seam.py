"""No module outside the workload adapters names a specific job kind (issue 19's seam).

Kinds are adapters listed in :mod:`fleet.workloads.registry`; everything else iterates that list.
The names looked for come from the registry (every kind's group, version, kind, plural,
singular and short names: :func:`_words`), so the check follows a kind added there whatever its
name. Allowed to name kinds: ``fleet/workloads`` (the adapters), ``fleet/ascend.py``,
``fleet/kubeflow.py``, ``fleet/t9k.py``, ``fleet/jobset.py`` and ``fleet/trainer.py`` (the
upstream vocabularies), ``fleet/sim`` (the
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
    "fleet/jobset.py",
    "fleet/trainer.py",
    "fleet/volcano.py",
    "fleet/batch.py",
    "fleet/sim/",
    "fleet/state/wire.py",
    "fleet/local/up.py",
)


def _words() -> re.Pattern[str]:
    """Every name a served job kind goes by, from the registry itself (so that a kind added there
    is looked for, whatever it is called): its API group when it is a CRD's (it has a dot), its
    ``group/version``, its kind as a word (``JobSet``, ``TrainJob``: case matters, so that the
    English word does not count), and its plural, singular and short names as words, unless one
    is also an everyday word of Fleet's own (``job``, ``jobs``, a batch Job's names) which then is
    found by its group and version. The runtimes and other served versions count as the kinds'."""
    from fleet.workloads import KINDS, OTHER_VERSIONS, RUNTIME_KINDS

    common = {"job", "jobs"}
    parts: set[str] = set()
    for rt in (*(a.resource for a in KINDS), *OTHER_VERSIONS, *RUNTIME_KINDS):
        if "." in rt.group:
            parts.add(re.escape(rt.group))
        parts.add(re.escape(f"{rt.group}/{rt.version}") if rt.group else re.escape(rt.version))
        if rt.kind.lower() not in common:
            parts.add(rf"(?<![A-Za-z]){re.escape(rt.kind)}")
        for name in (rt.plural, rt.singular, *rt.short_names):
            if name.lower() not in common:
                parts.add(rf"(?i:(?<![a-z]){re.escape(name)}(?![a-z]))")
    # The spellings the adapters' own modules and constants use (FLEET_ASCENDJOB, T9K_MPIJOB).
    parts.add(
        r"(?i:ascendjob|mindxdl|pytorchjob|tfjob|mpijob|tensorflowtrainingjob|tensorstack|volcano_job|batch_job)"
    )
    return re.compile("|".join(sorted(parts)))


KIND_WORDS = _words()


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


def test_the_check_follows_the_registry_whatever_a_kind_is_called(tmp_path: Path) -> None:
    """The words come from the registry: the kinds added since the fixed list (JobSet, TrainJob and
    its runtimes, MPIJob's v1) are looked for by every name they go by."""
    module = tmp_path / "m.py"
    module.write_text(
        'A = "jobset.x-k8s.io"\nB = "JobSet"\nC = "trainjobs"\nD = "ClusterTrainingRuntime"\n'
        'E = "kubeflow.org/v1"\nF = "a job of jobs"\nG = "the Job kind"\n'
    )
    hits = [h.split(": ", 1)[1] for h in _kind_names(module, tmp_path)]
    assert hits == [
        "'jobset.x-k8s.io'",
        "'JobSet'",
        "'trainjobs'",
        "'ClusterTrainingRuntime'",
        "'kubeflow.org/v1'",
    ]
