"""The AscendJob resources as the tests name them (production code iterates the registry)."""

from __future__ import annotations

from typing import Final

from fleet.kinds import fleet_kind
from fleet.workloads import ascendjob, member_resource
from fleet.workloads.ascendjob import ASCENDJOB
from fleet.workloads.kubeflow_jobs import pytorchjob

__all__ = ["ASCENDJOB", "FLEET_ASCENDJOB", "FLEET_PYTORCHJOB", "JOBS", "PYTORCHJOBS"]

#: AscendJob as the fleet serves it.
FLEET_ASCENDJOB: Final = fleet_kind(ascendjob)
#: PyTorchJob as the fleet serves it.
FLEET_PYTORCHJOB: Final = fleet_kind(pytorchjob)
#: AscendJob as member access names it.
JOBS: Final = member_resource(ASCENDJOB)
#: PyTorchJob as member access names it.
PYTORCHJOBS: Final = member_resource(pytorchjob.resource)
