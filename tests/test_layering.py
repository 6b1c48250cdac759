"""The dependency direction of DESIGN.md, checked on the import statements of every module.

* ``queues`` never imports ``fleet`` (the quota engine knows nothing of clusters);
* nothing in production imports ``tests`` or ``bench``;
* only the CLI and ``fleet up`` (``fleet.local``) import the simulator: Fleet's own code path never
  depends on it, members are reached over HTTP;
* the kube-compatible serving core (``fleet.apiserver``) and member access (``fleet.members``) are
  layers others build on: they import no other part of Fleet but the base modules: the shared
  Ascend names, the hot-path JSON codec (``fleet.fastjson``), the timestamp format
  (``fleet.timestamps``) and label matching (``fleet.label_match``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> dict[str, set[str]]:
    """Module name -> the absolute module names it imports, for every module of ``package``."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[module] = names
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _violations(
    package: str, rule: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()
) -> list[str]:
    return [
        f"{module} imports {name} ({rule})"
        for module, names in _imports(package).items()
        if not any(_under(module, a) for a in allowed)
        for name in sorted(names)
        if any(_under(name, f) for f in forbidden)
    ]


@pytest.mark.parametrize("package", ["queues", "fleet"])
def test_production_code_never_imports_tests_or_benchmarks(package: str) -> None:
    assert _violations(package, "tests and benchmarks are not shipped", ("tests", "bench")) == []


def test_queues_never_imports_fleet() -> None:
    assert _violations("queues", "the quota engine knows nothing of clusters", ("fleet",)) == []


def test_only_the_cli_and_fleet_up_import_the_simulator() -> None:
    rule = "members are reached over HTTP, never in-process"
    assert _violations("fleet", rule, ("fleet.sim",), allowed=("fleet.sim", "fleet.cli", "fleet.local")) == []


@pytest.mark.parametrize("layer", ["fleet.apiserver", "fleet.members"])
def test_the_base_layers_import_no_other_part_of_fleet(layer: str) -> None:
    base = ("ascend.py", "fastjson.py", "label_match.py", "timestamps.py")
    shared = ("__init__.py", "__pycache__", "py.typed", *base)
    others = ["fleet." + path.stem for path in (ROOT / "fleet").iterdir() if path.name not in shared]
    forbidden = tuple(name for name in others if name != layer)
    found = [v for v in _violations("fleet", "a base layer", forbidden) if v.startswith(layer)]
    assert found == []
