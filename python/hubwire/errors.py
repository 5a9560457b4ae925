"""The one error type of hubwire, :class:`HubwireError`, carrying a status
code of ``spec/errors.md``, and :class:`Failure`, a method's declared,
typed failure.

A handler raises ``Failure(value)`` to fail on purpose: the value travels
to the caller in the call's codec, and the caller's SDK raises it again as
``Failure.of(type(value))``, so a caller catches a declared failure by its
type::

    try:
        await conn.call("divide", Div(a=1, b=0), output=float, errors=DivByZero)
    except hubwire.Failure.of(DivByZero) as f:
        print(f.value.dividend)

Any other exception raised by a handler is a ``defect`` of that call only.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from .codes import Code

T = TypeVar("T")


class HubwireError(Exception):
    """An error with a hubwire status code (``code``) and a message for humans."""

    code: Code
    message: str
    #: For a ``failure`` on its way to the wire: the encoded value, ``(codec, bytes)``.
    detail: tuple[int, bytes] | None

    def __init__(self, code: Code, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message
        self.detail = None

    @property
    def retryable(self) -> bool:
        """Whether the spec says a retry may succeed (``unavailable``; the
        peer never saw the call)."""
        return self.code == Code.unavailable


class Failure(HubwireError, Generic[T]):
    """A declared, typed failure of a method: ``value`` is part of its contract.

    Raise it in a handler; catch it in a caller, either as ``Failure`` (any
    declared failure) or as ``Failure.of(SomeType)`` (a failure whose value
    decoded as ``SomeType``).
    """

    value: T
    #: The value type of a class made by :meth:`of` (None for ``Failure`` itself).
    value_type: ClassVar[type[Any] | None] = None
    _classes: ClassVar[dict[type[Any], type[Failure[Any]]]] = {}

    def __init__(self, value: T, message: str = "") -> None:
        super().__init__(Code.failure, message or f"declared failure: {value!r}")
        self.value = value

    @staticmethod
    def of(value_type: type[T]) -> type[Failure[T]]:
        """The exception class for failures whose value is a ``value_type``
        (one class per type, made on first use), for ``except`` clauses."""
        cls = Failure._classes.get(value_type)
        if cls is None:
            name = f"Failure[{getattr(value_type, '__name__', repr(value_type))}]"
            cls = type(name, (Failure,), {"value_type": value_type, "__doc__": f"A declared failure carrying a {name[8:-1]}."})
            Failure._classes[value_type] = cls
        return cls

    @staticmethod
    def raise_for(value: Any, message: str = "") -> Failure[Any]:
        """The failure exception for a decoded value: ``Failure.of(type(value))``
        when that class exists or the value is a class instance, else ``Failure``."""
        t = type(value)
        if t in Failure._classes or not isinstance(value, (dict, list, str, int, float, bool, bytes, type(None))):
            return Failure.of(t)(value, message)
        return Failure(value, message)
