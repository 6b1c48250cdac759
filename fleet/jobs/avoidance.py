"""Which members a queued job keeps off, and when its exclusions give way: one rule for the
dispatcher's cycle (:mod:`fleet.dispatch.lead.cycle`) and for ``explain``
(:mod:`fleet.endpoint.explain`), so that what explain says is what the cycle does.

Two kinds of member are kept off. **Never**: members the fleet may not use now (NotReady,
degraded, a namesake's, given by the caller), those that refused the job for a reason of their
own (``status.refused``), its firm exclusions (``status.excludedFirmly``) and the members its
policy suspends dispatching to (``spec.suspension.dispatching.clusterNames``, Karmada's
``Suspension``). **Excluded**: the members it failed on recently (``status.excluded``, set by
:class:`fleet.jobs.lifecycle.EndAttempt`): such an exclusion gives way when no other member fits
the job now, rather than keep it waiting beside a member that would take it (Karmada's
``ClusterFailoverBehavior`` keeps off only while there is somewhere else to go).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

from fleet.jobs.fleet_status import exclusions_of, refused_of
from fleet.policy import PropagationPolicy

__all__ = ["Avoidance", "avoidance_of"]

Found = TypeVar("Found")


@dataclass(frozen=True)
class Avoidance:
    """The members a job keeps off now: ``never`` ones, and ``excluded`` ones that give way."""

    never: frozenset[str]
    excluded: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.never | self.excluded

    def place(self, attempt: Callable[[frozenset[str]], Found]) -> tuple[Found, frozenset[str]]:
        """``attempt`` (a placement avoiding the members it is given) with every member kept off;
        when that finds nothing and the job has exclusions, again with only the ``never`` ones.
        Returns what was found and the members it avoided."""
        found = attempt(self.all)
        if not found and self.excluded:
            again = attempt(self.never)
            if again:
                return again, self.never
        return found, self.all


def avoidance_of(
    obj: Mapping[str, object], policy: PropagationPolicy, *, now: float, unusable: Collection[str] = ()
) -> Avoidance:
    """The members job ``obj`` keeps off at ``now`` under ``policy``; ``unusable``: the members the
    fleet may not use now whatever the job (NotReady, degraded, taken by a namesake)."""
    firm = {m for m, until in exclusions_of(obj, firm=True).items() if until > now}
    excluded = frozenset(m for m, until in exclusions_of(obj).items() if until > now)
    suspended = set(policy.spec.suspension.dispatching_on_clusters.cluster_names)
    never = frozenset(set(unusable) | set(refused_of(obj)) | firm | suspended)
    return Avoidance(never, excluded - never)
