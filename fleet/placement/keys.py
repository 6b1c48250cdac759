"""Every Redis key name of the reservation store.

All keys of one member share the hash tag ``{res:<member>}``: a reservation never spans members,
so each script touches one hash slot and runs unchanged on Redis Cluster. The scripts receive
:meth:`ReservationKeys.base` as ``KEYS[1]`` and append the suffixes below, so a name is spelt
here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["EXPIRY", "HELD", "ITEMS", "TAKES", "VERSION", "ReservationKeys"]

#: Hash ``<node>|<resource>`` -> amount held by all live reservations.
HELD: Final = "held"
#: Hash reservation id -> the reservation as JSON.
ITEMS: Final = "items"
#: Sorted set reservation id -> expiry (epoch seconds).
EXPIRY: Final = "expiry"
#: Hash ``<node>|<resource>`` -> amount, one per reservation (``takes:<id>``).
TAKES: Final = "takes:"
#: Counter bumped on every change, which is what a dispatcher's cache compares.
VERSION: Final = "version"


@dataclass(frozen=True)
class ReservationKeys:
    prefix: str = "fleet"

    def base(self, member: str) -> str:
        return f"{self.prefix}:{{res:{member}}}:"

    def held(self, member: str) -> str:
        return self.base(member) + HELD

    def items(self, member: str) -> str:
        return self.base(member) + ITEMS

    def expiry(self, member: str) -> str:
        return self.base(member) + EXPIRY

    def takes(self, member: str, reservation_id: str) -> str:
        return self.base(member) + TAKES + reservation_id

    def version(self, member: str) -> str:
        return self.base(member) + VERSION
