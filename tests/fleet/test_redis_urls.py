"""Redis URLs with a password or TLS: masked wherever shown, refused clearly when malformed, and
the command-line options that take them never show one (``--help`` included)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fleet.cli import main
from fleet.connections import MASK, check_url, mask_url, redis_from_url

SECRET = "s3cret-Pa55"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
        (f"redis://fleet:{SECRET}@redis.example:6379/2", "redis://fleet:***@redis.example:6379/2"),
        (
            f"rediss://:{SECRET}@redis:6380/0?ssl_ca_certs=/etc/fleet/ca.crt&ssl_cert_reqs=required",
            "rediss://:***@redis:6380/0?ssl_ca_certs=/etc/fleet/ca.crt&ssl_cert_reqs=required",
        ),
        (
            f"rediss://redis:6380/0?ssl_keyfile=/k.pem&ssl_password={SECRET}&db=1",
            "rediss://redis:6380/0?ssl_keyfile=/k.pem&ssl_password=***&db=1",
        ),
        (f"unix:///run/redis.sock?db=0&password={SECRET}", "unix:///run/redis.sock?db=0&password=***"),
        # Not percent-encoded: the user part still runs to the last "@", all of it masked.
        (f"redis://:{SECRET}/x?y#z@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
        ("redis://fleet@10.0.0.5:6379/0", "redis://fleet@10.0.0.5:6379/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("not a url", "not a url"),
    ],
)
def test_a_password_never_shows_in_a_masked_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert SECRET not in mask_url(url)
    assert mask_url(mask_url(url)) == shown


def test_a_malformed_url_is_explained_without_its_password() -> None:
    assert check_url(f"redis://:{SECRET}@10.0.0.5:6379/0") is None
    assert check_url(f"rediss://u:{SECRET}@h:1/0?ssl_cert_reqs=required") is None
    broken = "redis://:ab/cd@10.0.0.5:6379/0"  # urllib's own error would repeat "ab"
    problem = check_url(broken)
    assert problem is not None and "ab" not in problem.replace("able", "") and "percent-encoded" in problem
    assert problem.startswith(f"redis://:{MASK}@")
    wrong_scheme = check_url(f"http://:{SECRET}@h:1/0")
    assert wrong_scheme is not None and SECRET not in wrong_scheme and "scheme" in wrong_scheme
    with pytest.raises(ValueError, match="invalid Redis URL") as caught:
        redis_from_url(f"redis://:{SECRET}/x@h:1/0")
    assert SECRET not in str(caught.value) and caught.value.__context__ is None


COMMANDS = [
    ["api"],
    ["dispatcher"],
    ["worker"],
    ["syncer"],
    ["up"],
    ["quota", "queues"],
    ["quota", "apply"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_never_shows_the_redis_url_from_the_environment(command: list[str]) -> None:
    env = {"FLEET_REDIS_URL": f"redis://:{SECRET}@10.0.0.5:6379/0"}
    result = CliRunner().invoke(main, [*command, "--help"], env=env)
    assert result.exit_code == 0, result.output
    assert "--redis" in result.output
    assert SECRET not in result.output


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ["quota", "apply"]], ids=" ".join)
def test_a_malformed_url_is_refused_before_anything_starts_without_its_password(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--redis", f"redis://:{SECRET}/x@h:1/0"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--redis'" in result.output and "percent-encoded" in result.output
    assert SECRET not in result.output and "/x" not in result.output


def test_an_unreachable_or_refusing_redis_is_reported_masked() -> None:
    """``fleet quota queues`` against a Redis that is not there: the error names it, masked."""
    from tests.support.net import free_port

    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    result = CliRunner().invoke(main, ["quota", "queues", "--redis", url])
    assert result.exit_code == 1
    assert "error: redis at redis://:***@127.0.0.1:" in result.output
    assert SECRET not in result.output
