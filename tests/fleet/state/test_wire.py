"""How objects sit in Redis: compressed, with the resourceVersion the script gave them in front.

A million queued jobs live in Redis' memory, so the stored form matters to whoever pays for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from fleet.state import Objects
from fleet.state.keys import field_name, kind_name
from tests.fleet.state.conftest import RedisLane
from tests.support.kinds import FLEET_ASCENDJOB

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"


def sample_job() -> dict[str, Any]:
    """The sample AscendJob as ``kubectl apply`` sends it in namespace ``default``."""
    job: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    job["metadata"]["namespace"] = "default"
    return job


def test_a_stored_job_takes_a_fraction_of_its_json_and_reads_back_whole(redis_lane: RedisLane) -> None:
    objects = Objects(redis_lane.sync)
    created = objects.create(FLEET_ASCENDJOB, sample_job())
    raw = redis_lane.sync.hget(
        objects.keys.objects(kind_name(FLEET_ASCENDJOB.key)),
        field_name(created["metadata"]["namespace"], created["metadata"]["name"]),
    )
    assert isinstance(raw, bytes)
    assert raw.startswith(created["metadata"]["resourceVersion"].encode() + b":")
    assert len(raw) * 3 < len(json.dumps(created, separators=(",", ":")))
    assert objects.get(FLEET_ASCENDJOB, "default", created["metadata"]["name"]) == created


def test_the_change_stream_carries_the_same_object_with_its_version(redis_lane: RedisLane) -> None:
    objects = Objects(redis_lane.sync)
    since = objects.resource_version()
    created = objects.create(FLEET_ASCENDJOB, sample_job())
    events, _ = objects.changes(FLEET_ASCENDJOB, since, block_ms=0)
    assert [(e.type, e.object) for e in events] == [("ADDED", created)]
