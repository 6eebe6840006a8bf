"""Argument checks shared by triggers and strategies, with Spring AI Session's messages."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def required(value: T | None, name: str) -> T:
    """`value` itself; `ValueError` when it is `None`."""
    if value is None:
        raise ValueError(f"{name} must not be None")
    return value


def positive(value: int, name: str) -> int:
    if value <= 0:
        raise ValueError(f"{name} must be greater than 0")
    return value


def non_negative(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name} must be >= 0")
    return value


def not_blank(value: str, name: str) -> str:
    if value is None or not value.strip():
        raise ValueError(f"{name} must not be empty")
    return value


def optional_counter(value: Any) -> Any:
    """An estimator: `None` (the request's counter) or any `Callable[[str], int]`."""
    if value is not None and not callable(value):
        raise ValueError(f"estimator must be callable (str -> int), got {value!r}")
    return value
