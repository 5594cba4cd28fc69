"""The procedure registry: registers procedures and looks them up by name, nothing else.

:func:`register` is the public decorator (user procedures become callable from
:func:`procedures.call`, :func:`procedures.sql` and the ``procedures-sql`` console alike); the
declaration is validated by :func:`procedures.framework.declaration.declare`.  The built-in
procedures register themselves when :mod:`procedures.builtin` is imported, which the front end
(:mod:`procedures.frontend.runner`) does: this module never imports them.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

from procedures.errors import NoSuchProcedureError, ValidationError
from procedures.framework.declaration import OutputColumn, Parameter, Procedure, declare

__all__ = ["register", "unregister", "get_procedure", "list_procedures"]

_REGISTRY: dict[str, Procedure] = {}
_LOCK = threading.Lock()


def register(
    name: str | None = None,
    *,
    parameters: Sequence[Parameter | tuple] = (),
    output: Sequence[OutputColumn | tuple] = (),
    doc: str | None = None,
    replace: bool = False,
) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn(ctx, **args) -> rows`` as procedure ``name`` (default: the function's name).

    ``parameters`` are :class:`Parameter` objects or ``(name, type, required, default, doc)`` tuples;
    ``output`` are :class:`OutputColumn` objects or ``(name, type, nullable, doc)`` tuples.  Names are
    lower-case; registering an existing name needs ``replace=True``.
    """

    def deco(fn: Callable) -> Callable:
        proc_name = (name or fn.__name__).lower()
        proc = declare(proc_name, fn, parameters, output, doc)
        with _LOCK:
            if proc_name in _REGISTRY and not replace and _REGISTRY[proc_name].fn is not fn:
                raise ValidationError(f"A procedure named {proc_name} is already registered; pass replace=True")
            _REGISTRY[proc_name] = proc
        fn.procedure = proc  # type: ignore[attr-defined]
        return fn

    return deco


def unregister(name: str) -> None:
    """Remove a registered procedure (mainly for tests of user procedures)."""
    with _LOCK:
        _REGISTRY.pop(name.lower(), None)


def list_procedures() -> list[str]:
    """Names of every registered procedure, sorted."""
    return sorted(_REGISTRY)


def get_procedure(name: str) -> Procedure:
    """The procedure registered as ``name`` (case-insensitive); NoSuchProcedureError otherwise."""
    proc = _REGISTRY.get(name.lower())
    if proc is None:
        raise NoSuchProcedureError(
            f"Procedure system.{name} not found; available procedures: {', '.join(sorted(_REGISTRY))}"
        )
    return proc
