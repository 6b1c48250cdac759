"""Every Redis key name of the reservation store.

All keys of one member share the hash tag ``{res:<member>}``: a reservation never spans members,
so each script touches one hash slot and runs unchanged on Redis Cluster. The scripts receive
the member's base (:meth:`ReservationKeys.member_base`) as ``KEYS[1]`` and append the suffixes
declared in :class:`MemberReservationKeys`, so a name is spelt here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from queues import KeyParts, KeySpace, key, key_function

__all__ = ["MemberReservationKeys", "ReservationKeys"]


@dataclass(frozen=True)
class MemberReservationKeys(KeySpace):
    """Key names of one member's reservations: ``tag`` is ``res:<member>``
    (:meth:`ReservationKeys.member`). The scripts are given the base as ``KEYS[1]``."""

    def lua_base(self) -> str:
        """``KEYS[1]``: a script is given its member's base, which routes it."""
        return "KEYS[1]"

    @key("K_HELD")
    def held(self) -> str:
        """Hash ``<node>|<resource>`` -> amount held by all live reservations."""
        return "held"

    @key("K_ITEMS")
    def items(self) -> str:
        """Hash reservation id -> the reservation as JSON."""
        return "items"

    @key("K_EXPIRY")
    def expiry(self) -> str:
        """Sorted set reservation id -> expiry (epoch seconds)."""
        return "expiry"

    @key("K_VERSION")
    def version(self) -> str:
        """Counter bumped on every change, which is what a dispatcher's cache compares."""
        return "version"

    @key_function("k_takes")
    def takes(self, id: str) -> KeyParts:
        """Hash ``<node>|<resource>`` -> amount, one per reservation."""
        return "takes:", id


@dataclass(frozen=True)
class ReservationKeys(KeySpace):
    """Key names of the reservations, one hash tag per member: ``<tag>:<member>`` (``res:m1``).
    The tag is the set's own, not the deployment's: :meth:`within` takes only the prefix."""

    tag: str = "res"

    @classmethod
    def within(cls, space: KeySpace) -> Self:
        return cls(prefix=space.prefix)

    def member(self, member: str) -> MemberReservationKeys:
        """The key names of ``member``'s reservations."""
        return MemberReservationKeys(prefix=self.prefix, tag=f"{self.tag}:{member}")

    def member_base(self, member: str) -> str:
        """What every key of ``member``'s reservations starts with: ``<prefix>:{res:<member>}:``."""
        return self.member(member).base

    def lua(self) -> str:
        """A member's names (:class:`MemberReservationKeys`): every script works on one member."""
        return MemberReservationKeys(prefix=self.prefix, tag=self.tag).lua()
