"""The API reads its token file again while it runs (issue 33, req. 5): a token added is accepted
within a second, one removed is refused, and a file that stops parsing keeps the tokens before."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.endpoint.auth import FleetAuthorizer, TokenAuthenticator, TokenFile, TokenFileError

ADMIN = 'admin-token,fleet-admin,fleet-admin,"fleet:admins"\n'
BOB = 'bob-token,bob,bob,"namespace:team-b"\n'


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_a_token_added_or_removed_while_running_counts_at_once(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(ADMIN)
    source = TokenFile(path, interval=0.0)
    authenticate, authorize = TokenAuthenticator(source), FleetAuthorizer(source)
    assert authenticate(bearer("admin-token")) == "fleet-admin"
    assert authenticate(bearer("bob-token")) is None

    path.write_text(ADMIN + BOB)
    assert authenticate(bearer("bob-token")) == "bob"
    assert authorize.user_info("bob")["groups"] == ["namespace:team-b", "system:authenticated"]

    path.write_text(ADMIN)
    assert authenticate(bearer("bob-token")) is None


def test_a_file_that_stops_parsing_keeps_the_tokens_read_before(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(ADMIN + BOB)
    source = TokenFile(path, interval=0.0)
    path.write_text("only-a-token\n")
    assert TokenAuthenticator(source)(bearer("bob-token")) == "bob"


def test_changes_are_looked_for_at_most_once_an_interval(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(ADMIN)
    source = TokenFile(path, interval=0.3)
    path.write_text(ADMIN + BOB)
    authenticate = TokenAuthenticator(source)
    assert authenticate(bearer("bob-token")) is None  # within the interval: not looked at yet
    time.sleep(0.35)
    assert authenticate(bearer("bob-token")) == "bob"


def test_an_unreadable_file_at_start_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match=r"tokens\.csv"):
        TokenFile(tmp_path / "tokens.csv")
