"""Who is signed in to the console, and what they may see: the API's own rules, asked, never copied.

Signing in
    The sign-in page takes a bearer token, the same one kubectl sends. It is checked by the API's
    authenticator (:class:`fleet.endpoint.auth.TokenAuthenticator`); when it names a user, a
    session is kept in Redis (:meth:`Sessions.open`: a random id, whose SHA-256 names the key,
    holding the token, expiring after :data:`SESSION_SECONDS`) and its id goes to the browser in
    an ``HttpOnly``, ``Secure``, ``SameSite=Strict`` cookie (the ``__Host-`` prefix: this origin,
    path ``/``). Every request reads the token back and authenticates it again, so a token taken
    out of the token file stops working at once, and any replica serves any session. Signing out
    deletes the session. A missing, expired or unknown session, or a token no longer accepted,
    gets the sign-in page: never an error page.

What a user sees
    Exactly what the API would let them read: every read the console makes is first put to the
    API's authorizer as the :class:`fleet.apiserver.Access` the same request to the API would
    make (:meth:`Viewer.may`): a list shows the rows of the kinds and namespaces the user may
    list. A tenant of ``namespace:team-a`` sees team-a's jobs, their Events and explanations; of
    the quota tree, only the nodes that bind its namespaces and their ancestors (the API lets every user read
    the whole tree; the console shows a tenant no more than concerns it). Without a token file
    (the API serves everyone, local use) the console does too, with no sign-in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Final

import redis.asyncio

from fleet.apiserver import Access, ResourceType
from fleet.endpoint.auth import FleetAuthorizer, Identity, TokenAuthenticator
from fleet.endpoint.keys import ApiKeys

__all__ = ["COOKIE", "SESSION_SECONDS", "Sessions", "Viewer"]

#: The session cookie (``__Host-``: sent only over HTTPS, to this host, for every path).
COOKIE: Final = "__Host-fleet-console"
#: How long a session lasts after signing in (seconds).
SESSION_SECONDS: Final = 12 * 3600
#: The user name of a request when the API serves without authentication.
ANONYMOUS: Final = "system:anonymous"


@dataclass(frozen=True)
class Viewer:
    """The signed-in user, and what the API's authorizer lets them do."""

    user: str
    authorizer: FleetAuthorizer | None
    identity: Identity | None = None

    @property
    def signed_in(self) -> bool:
        """False when the API serves without authentication (nobody signs in)."""
        return self.authorizer is not None

    @property
    def admin(self) -> bool:
        return self.authorizer is None or (self.identity is not None and self.identity.admin)

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset() if self.identity is None else self.identity.namespaces

    def may(
        self,
        verb: str,
        rt: ResourceType,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> bool:
        """What the API's authorizer answers for this access."""
        if self.authorizer is None:
            return True
        return self.authorizer.allows(Access(self.user, verb, rt, namespace, name, subresource))


def _key(keys: ApiKeys, session: str) -> str:
    return keys.console_session(hashlib.sha256(session.encode()).hexdigest())


class Sessions:
    """Console sessions in Redis (see the module docstring)."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keys: ApiKeys,
        authenticator: TokenAuthenticator | None,
        authorizer: FleetAuthorizer | None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.authenticator = authenticator
        self.authorizer = authorizer

    @property
    def required(self) -> bool:
        """Whether users sign in (the API authenticates)."""
        return self.authenticator is not None

    def _viewer(self, token: str) -> Viewer | None:
        if self.authenticator is None:
            return Viewer(ANONYMOUS, None)
        user = self.authenticator({"authorization": f"Bearer {token}"})
        if user is None:
            return None
        identity = next((i for i in self.authenticator.identities() if i.user == user), None)
        return Viewer(user, self.authorizer, identity)

    def check(self, token: str) -> Viewer | None:
        """The user a pasted token names, or None when the API would not accept it."""
        return self._viewer(token.strip()) if token.strip() else None

    async def open(self, token: str) -> str:
        """A new session for an accepted ``token``; returns its id (the cookie's value)."""
        session = secrets.token_urlsafe(32)
        await self.client.set(_key(self.keys, session), token.strip(), ex=SESSION_SECONDS)
        return session

    async def viewer(self, session: str | None) -> Viewer | None:
        """Who the session is, authenticated again now; None to sign in (again)."""
        if self.authenticator is None:
            return Viewer(ANONYMOUS, None)
        if not session:
            return None
        token = await self.client.get(_key(self.keys, session))
        if token is None:
            return None
        return self._viewer(token.decode() if isinstance(token, bytes) else str(token))

    async def close(self, session: str | None) -> None:
        if session:
            await self.client.delete(_key(self.keys, session))
