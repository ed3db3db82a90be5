"""The service's one exception hierarchy. No web framework here, so the core may raise InputError.

SchedError                    base, never raised directly
├── InputError(ValueError)    422  `errors`: every problem found, each with loc, msg, type
├── NotFoundError             404  unknown cluster_id / plan_id
├── VersionConflictError      409  stale If-Match
├── PayloadTooLargeError      413  body over Settings.max_body_bytes
├── UnsupportedMediaTypeError 415  a body that is not declared JSON
└── StoreUnavailableError     503  the cache store cannot be reached
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    loc: tuple[str | int, ...]
    msg: str
    type: str = "value_error"


class SchedError(Exception):
    """Base of every error the service answers with a 4xx/5xx on purpose."""


class InputError(SchedError, ValueError):
    def __init__(self, errors: list[ErrorDetail]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in errors))

    @classmethod
    def single(cls, loc: tuple[str | int, ...], msg: str, type_: str = "value_error") -> InputError:
        return cls([ErrorDetail(loc, msg, type_)])


class NotFoundError(SchedError):
    pass


class VersionConflictError(SchedError):
    pass


class PayloadTooLargeError(SchedError):
    pass


class UnsupportedMediaTypeError(SchedError):
    pass


class StoreUnavailableError(SchedError):
    pass
