"""Argument checks shared by triggers and strategies, with Spring AI Session's messages."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def required(value: T | None, name: str) -> T:
    """`value` itself; `ValueError` when it is `None`."""
    if value is None:
        raise ValueError(f"{name} must not be None")
    return value


def integer(value: object, name: str) -> int:
    """`value` itself when it is an `int` (not a `bool`, which Python counts as one); a float, a
    NaN or a string is a `ValueError`, never a count taken as meant."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def positive(value: int, name: str) -> int:
    if integer(value, name) <= 0:
        raise ValueError(f"{name} must be greater than 0")
    return value


def non_negative(value: int, name: str) -> int:
    if integer(value, name) < 0:
        raise ValueError(f"{name} must be >= 0")
    return value


def not_blank(value: str, name: str) -> str:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    if value is None or not value.strip():
        raise ValueError(f"{name} must not be empty")
    return value


def optional_counter(value: Any) -> Any:
    """An estimator: `None` (the request's counter) or any `Callable[[str], int]`."""
    if value is not None and not callable(value):
        raise ValueError(f"estimator must be callable (str -> int), got {value!r}")
    return value
