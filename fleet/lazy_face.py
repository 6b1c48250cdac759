"""A package face imported lazily (PEP 562), so that importing one name of a package does not
import the whole package: the CLI starts fast (issue 33).

A package lists its face as ``_FACE`` (name -> (module, attribute)), imports the same names under
``TYPE_CHECKING`` for the type checker, and calls :func:`lazy_face` once. A name is imported from
its module when first used and kept in the package. ``queues`` keeps its own copy of these lines:
it may not import Fleet.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import import_module
from types import ModuleType
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str, face: Mapping[str, tuple[str, str]]) -> None:
    """Serve ``face`` from package ``package`` (its ``__name__``) on first use."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        found = face.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(found[0]), found[1])
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *face})

    class Face(ModuleType):
        """Keeps a face name that is also a submodule's name bound to the face's object when that
        submodule is imported (the import system would bind the submodule over it)."""

        def __setattr__(self, name: str, value: Any) -> None:
            if name in face and isinstance(value, ModuleType):
                return
            super().__setattr__(name, value)

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
    sys.modules[package].__class__ = Face
