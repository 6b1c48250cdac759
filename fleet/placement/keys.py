"""Every Redis key name of the reservation store.

All keys of one member share the hash tag ``{res:<member>}``: a reservation never spans members,
so each script touches one hash slot and runs unchanged on Redis Cluster. The scripts receive
:meth:`ReservationKeys.member_base` as ``KEYS[1]`` and append the suffixes below, so a name is
spelt here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Self

from queues import KeySpace, lua_key, lua_key_function, lua_string

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
class ReservationKeys(KeySpace):
    """Key names of the reservations, one hash tag per member: ``<tag>:<member>`` (``res:m1``).
    The tag is the set's own, not the deployment's: :meth:`within` takes only the prefix."""

    tag: str = "res"

    @classmethod
    def within(cls, space: KeySpace) -> Self:
        return cls(prefix=space.prefix)

    def lua_base(self) -> str:
        """``KEYS[1]``: a script is given its member's :meth:`member_base`, which routes it."""
        return "KEYS[1]"

    def lua_names(self) -> list[str]:
        return [
            lua_key("K_HELD", HELD),
            lua_key("K_ITEMS", ITEMS),
            lua_key("K_EXPIRY", EXPIRY),
            lua_key("K_VERSION", VERSION),
            lua_key_function("k_takes", lua_string(TAKES), "id"),
        ]

    def member_base(self, member: str) -> str:
        """What every key of ``member``'s reservations starts with: ``<prefix>:{res:<member>}:``."""
        return self.tagged(f"{self.tag}:{member}")

    def held(self, member: str) -> str:
        return self.member_base(member) + HELD

    def items(self, member: str) -> str:
        return self.member_base(member) + ITEMS

    def expiry(self, member: str) -> str:
        return self.member_base(member) + EXPIRY

    def takes(self, member: str, reservation_id: str) -> str:
        return self.member_base(member) + TAKES + reservation_id

    def version(self, member: str) -> str:
        return self.member_base(member) + VERSION
