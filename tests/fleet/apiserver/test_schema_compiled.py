"""The compiled checks (``jsonschema-rs``) and the walks they spare give one verdict.

:func:`fleet.apiserver.schema.schema_causes` trusts the compiled check's yes and asks
``jsonschema`` only when it says no, so a yes where ``jsonschema`` finds a cause would let a bad
object in. Every sample of a served kind with a schema, and many mutations of each (a value of
another JSON type, a field removed, an unknown field added, at a random depth), must get the same
verdict from both.
"""

from __future__ import annotations

import copy
import datetime
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.apiserver.resources import ResourceType
from fleet.apiserver.schema import _conforms, _untouched, _validator, _walk, prune, schema_causes
from fleet.endpoint.registry import fleet_registry

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
MUTATIONS = 60
#: Values of every JSON type, to put where another was.
VALUES: tuple[Any, ...] = ("two", 2, 2.5, 1.0, True, None, [], ["x"], {}, {"x": 1}, -1, "")


def _kinds() -> dict[tuple[str, str], ResourceType]:
    registry = fleet_registry()
    return {(rt.api_version, rt.kind): rt for rt in registry._by_path.values() if rt.schema is not None}


def _samples() -> list[tuple[str, dict[str, Any]]]:
    kinds = _kinds()
    out = []
    for path in sorted(SAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) in kinds:
                out.append((f"{path.relative_to(SAMPLES)}:{doc['kind']}", doc))
    return out


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``node`` (keys and indexes), the root's children first."""
    out: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append((*path, key))
        out.extend(_places(value, (*path, key)))
    return out


def _mutant(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    path = rng.choice(_places(out))
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    how = rng.randrange(3)
    if how == 0:
        parent[last] = copy.deepcopy(rng.choice(VALUES))
    elif how == 1 and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent[last], dict):
        field = rng.choice(["unknownField", "x", "replicas", "name"])
        parent[last][field] = copy.deepcopy(rng.choice(VALUES))
    else:
        parent[last] = copy.deepcopy(rng.choice(VALUES))
    return out


SAMPLED = _samples()


def test_the_samples_cover_the_kinds_users_submit() -> None:
    kinds = {name.split(":")[1] for name, _ in SAMPLED}
    assert {"AscendJob", "PyTorchJob", "TFJob", "MPIJob", "ElasticQuotaTree", "PropagationPolicy"} <= kinds


@pytest.mark.parametrize(("name", "sample"), SAMPLED, ids=[name for name, _ in SAMPLED])
def test_the_compiled_check_and_jsonschema_agree_on_a_sample_and_its_mutations(
    name: str, sample: dict[str, Any]
) -> None:
    rt = _kinds()[(sample["apiVersion"], sample["kind"])]
    assert rt.schema is not None
    validator = _validator(rt.schema)
    assert _conforms(rt.schema, sample), "a sample as written takes the fast path"
    rng = random.Random(name)
    refused = 0
    mutants = [{**sample, "spec": "two"}] if "spec" in sample else []
    mutants += [_mutant(sample, rng) for _ in range(MUTATIONS)]
    for mutant in mutants:
        conforms = not list(validator.iter_errors(mutant))
        assert _conforms(rt.schema, mutant) == conforms, mutant
        assert (schema_causes(rt.schema, mutant) == []) == conforms
        refused += not conforms
    assert refused > 0, "some mutations break the schema, so the test can tell the two apart"


def test_what_the_compiled_check_cannot_take_is_left_to_the_walk() -> None:
    """Bodies reach the check as JSON decodes them (YAML re-encoded as JSON first), so a value
    JSON has no type for cannot come; if one did, the check answers no (the walk judges) and does
    not raise. An integer past 64 bits gets the walk's verdict."""
    name, sample = next((n, s) for n, s in SAMPLED if s["kind"] == "AscendJob")
    rt = _kinds()[(sample["apiVersion"], sample["kind"])]
    assert rt.schema is not None
    dated = copy.deepcopy(sample)
    dated["spec"]["schedulerName"] = datetime.date(2026, 11, 29)
    assert not _conforms(rt.schema, dated)
    for replicas in (2**70, -(2**70), 2**63):
        huge = copy.deepcopy(sample)
        next(iter(huge["spec"]["replicaSpecs"].values()))["replicas"] = replicas
        assert _conforms(rt.schema, huge) == (not list(_validator(rt.schema).iter_errors(huge))), name


def _nested_mutants(sample: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """Mutations pruning meets in what users send: an unknown field or a ``null`` put deep in the
    object (a container, a replica spec, the metadata), besides :func:`_mutant`'s."""
    out = []
    dicts = [p for p in _places(sample) if isinstance(_at(sample, p), dict)]
    for _ in range(MUTATIONS):
        mutant = copy.deepcopy(sample)
        where = _at(mutant, rng.choice(dicts)) if dicts else mutant
        field = rng.choice(["unknownField", "name", "replicas", "labels", "x"])
        where[field] = rng.choice([None, "two", 2, {"x": 1}, [{"x": 1}]])
        out.append(mutant)
    meta = copy.deepcopy(sample)
    meta["metadata"]["unknownMetaField"] = 1
    return [*out, meta, {**copy.deepcopy(sample), "metadata": None}, {**copy.deepcopy(sample), "extra": {}}]


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


@pytest.mark.parametrize(("name", "sample"), SAMPLED, ids=[name for name, _ in SAMPLED])
def test_the_compiled_prune_check_and_the_walk_agree_on_a_sample_and_its_mutations(
    name: str, sample: dict[str, Any]
) -> None:
    """:func:`prune` trusts the compiled check's yes ("nothing to drop") and walks only on a
    no: a yes where the walk would drop a field or a ``null`` would store what the API server
    drops. So the check says yes exactly when the walk finds nothing and changes nothing."""
    rt = _kinds()[(sample["apiVersion"], sample["kind"])]
    assert rt.schema is not None
    assert _untouched(sample, rt.schema), "a sample as written takes the fast path"
    rng = random.Random(name)
    mutants = [_mutant(sample, rng) for _ in range(MUTATIONS)] + _nested_mutants(sample, rng)
    touched = 0
    for mutant in mutants:
        walked = copy.deepcopy(mutant)
        meta, rest = _walk(walked, rt.schema, sort_keys=True)
        untouched = not meta and not rest and walked == mutant
        assert _untouched(mutant, rt.schema) == untouched, mutant
        pruned = copy.deepcopy(mutant)
        assert prune(pruned, rt.schema) == (meta, rest)
        assert pruned == walked
        touched += not untouched
    assert touched > 0, "some mutations are pruned, so the test can tell the two apart"
