"""The type of a templated operator argument: its value, or an XCom reference (``task.output``).

Airflow renders the operator's ``template_fields`` before ``execute``, so there an attribute holds
the value; ``rendered`` says so to the type checker.
"""

from __future__ import annotations

from typing import TypeAlias, TypeVar

from airflow.sdk import XComArg

T = TypeVar("T")

Templated: TypeAlias = T | XComArg


def rendered(value: Templated[T]) -> T:
    """A templated attribute's value inside ``execute``, where Airflow has resolved its XCom reference."""
    if isinstance(value, XComArg):
        raise TypeError(f"{value!r} is read before Airflow rendered it: templated values exist in execute")
    return value
