"""Quantities become exact integers in canonical units, through the kubernetes client's parser."""

from __future__ import annotations

from decimal import Decimal

import pytest

from queues.quantity import QuantityError, format_quantity, parse, parse_exact


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", 2, 2000),
        ("cpu", 999900, 999_900_000),
        ("memory", "40Gi", 40 * 2**30),
        ("memory", "400000Gi", 400_000 * 2**30),
        ("memory", "1k", 1000),
        ("huawei.com/Ascend910", 2, 2),
        ("kube-queue/max-jobs", 10000000000, 10_000_000_000),
        ("memory", "0.5", 1),  # rounded up like the API server
        ("cpu", "0.1m", 1),
    ],
)
def test_parse_canonical_units(resource: str, value: object, expected: int) -> None:
    assert parse(resource, value) == expected


@pytest.mark.parametrize("value", ["ten", "10Gb", "", None, True, "1.2.3", "Gi", " 2", "2 ", "1_000", "0x10"])
def test_parse_rejects_non_quantities(value: object) -> None:
    with pytest.raises(QuantityError):
        parse("memory", value)


def test_a_string_read_again_gives_the_same_amount_and_a_bad_one_fails_again() -> None:
    """The amounts of strings are kept (every node of a kind repeats its quantities): the same
    string gives the same amount for each resource's unit, and a string that is not a quantity
    is refused every time it comes, not only the first."""
    for _ in range(3):
        assert parse("cpu", "1500m") == 1500 and parse("memory", "1500m") == 2
        assert parse_exact("1500m") == Decimal("1.5")
        for bad in ("1_000", " 2"):
            with pytest.raises(QuantityError):
                parse("memory", bad)
            with pytest.raises(QuantityError):
                parse_exact(bad)


def test_parse_exact_keeps_the_fraction() -> None:
    """What ``resource.ParseQuantity`` reads, unrounded: whether an amount is whole is a rule."""
    assert parse_exact("1500m") == Decimal("1.5")
    assert parse_exact("2") == parse_exact(2) == parse_exact("2e0") == 2
    assert parse_exact("1Ki") == 1024


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [("cpu", 2500, "2500m"), ("cpu", 3000, "3"), ("memory", 10 * 2**30, "10Gi"), ("x", 8, "8")],
)
def test_format_quantity_round_trips(resource: str, amount: int, text: str) -> None:
    assert format_quantity(resource, amount) == text
    assert parse(resource, text) == amount
