"""Labels Fleet puts on every member copy of a job (and on its pod templates).

They name the fleet job (namespace and name: a label value cannot hold a ``/``), its uid and the
attempt, so a member copy or pod can be traced back to its fleet job, adopted after a restart, or
purged as stale, and so the capacity feed can tell when a reservation's pods have bound.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ATTEMPT_LABEL", "JOB_NAMESPACE_LABEL", "JOB_NAME_LABEL", "JOB_UID_LABEL"]

JOB_NAMESPACE_LABEL: Final = "fleet.io/job-namespace"
JOB_NAME_LABEL: Final = "fleet.io/job-name"
JOB_UID_LABEL: Final = "fleet.io/job-uid"
ATTEMPT_LABEL: Final = "fleet.io/attempt"
