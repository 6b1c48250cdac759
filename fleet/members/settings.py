"""Per-member knobs: timeouts, retries, backoff and watch pacing.

Members differ (a remote cluster over a WAN wants longer timeouts than a local one), so every
member carries its own :class:`MemberSettings`; a bad value is refused when the member is built,
naming the field, rather than failing later inside a retry loop.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["MemberSettings", "SettingsError"]


class SettingsError(ValueError):
    """A member setting breaks its rule; the message names the field and the rule."""


@dataclass(frozen=True)
class MemberSettings:
    """How Fleet talks to one member.

    ``attempts`` counts the first try: 4 means up to 3 retries of a transient failure, waiting
    ``backoff_initial * 2**n`` (with jitter, at most ``backoff_max``; a server's ``Retry-After`` is
    honoured up to ``backoff_max``) between them. Watches reconnect with their own backoff, capped at
    ``watch_backoff_max``; the server ends each watch after ``watch_timeout_seconds`` and a read
    that sees nothing for ``watch_read_timeout`` seconds (bookmarks included) is treated as a dead
    connection.

    Isolation (:mod:`fleet.members.guard`): one call, its retries included, takes at most about
    ``call_budget`` seconds (no retry starts that could not finish a full ``request_timeout``
    within it: a request that timed out is not sent again); at most ``max_concurrent_calls``
    calls go to the member at once from one process, a call waiting at most ``bulkhead_wait``
    for a slot; ``breaker_failures`` transient failures in a row open the member's circuit
    breaker, which fails calls at once for ``breaker_reset`` seconds before letting one trial
    through. Watches and health probes are not guarded: they are how a member is seen back.
    """

    connect_timeout: float = 2.0
    request_timeout: float = 10.0
    attempts: int = 4
    backoff_initial: float = 0.1
    backoff_max: float = 2.0
    probe_timeout: float = 1.0
    watch_timeout_seconds: int = 60
    watch_read_timeout: float = 90.0
    watch_backoff_initial: float = 0.1
    watch_backoff_max: float = 5.0
    page_size: int = 500
    pool_maxsize: int = 16
    call_budget: float = 15.0
    max_concurrent_calls: int = 8
    bulkhead_wait: float = 1.0
    breaker_failures: int = 3
    breaker_reset: float = 5.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SettingsError(f"member setting {field.name}: must be a number, got {value!r}")
            if value <= 0:
                raise SettingsError(f"member setting {field.name}: must be > 0, got {value!r}")
        for name in (
            "attempts",
            "watch_timeout_seconds",
            "page_size",
            "pool_maxsize",
            "max_concurrent_calls",
            "breaker_failures",
        ):
            if not isinstance(getattr(self, name), int):
                raise SettingsError(f"member setting {name}: must be a whole number")
        if self.backoff_initial > self.backoff_max:
            raise SettingsError("member setting backoff_initial: must be <= backoff_max")
        if self.watch_backoff_initial > self.watch_backoff_max:
            raise SettingsError("member setting watch_backoff_initial: must be <= watch_backoff_max")
