"""The service's one exception hierarchy. No web framework here, so the core may raise InputError.

SchedError                    base, never raised directly
├── InputError(ValueError)    422  `errors`: every problem found, each with loc, msg, type
├── NotFoundError             404  unknown plan_id
│   └── ClusterUnknownError   404  unknown or lost cluster_id (type `cluster_unknown`: PUT it again)
├── VersionConflictError      409  stale If-Match
│   └── ClusterBehindError    409  If-Match ahead of the cache: it lost acknowledged changes (PUT again)
├── PayloadTooLargeError      413  body over Settings.max_body_bytes
├── UnsupportedMediaTypeError 415  a body that is not declared JSON
├── StoreUnavailableError     503  the cache store cannot be reached
└── StoppingError             503  the service is shutting down (or the client left) before deciding
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


class ClusterUnknownError(NotFoundError):
    """The cache holds no such cluster: never PUT, deleted, or lost when the cache restarted
    without persistence. The resource manager's cure is the same in each case: PUT it again."""

    type = "cluster_unknown"

    def __init__(self, cluster_id: str, loc: tuple[str | int, ...] = ("path", "cluster_id")) -> None:
        self.cluster_id, self.loc = cluster_id, loc
        super().__init__(
            f"the cache holds no cluster {cluster_id!r} (never loaded, deleted, or lost when the "
            f"cache restarted without persistence): PUT /clusters/{cluster_id} with the whole "
            "snapshot, then send this request again")

    def at(self, loc: tuple[str | int, ...]) -> ClusterUnknownError:
        return ClusterUnknownError(self.cluster_id, loc)


class VersionConflictError(SchedError):
    pass


class PayloadTooLargeError(SchedError):
    pass


class UnsupportedMediaTypeError(SchedError):
    pass


class StoreUnavailableError(SchedError):
    pass


class ClusterBehindError(VersionConflictError):
    """If-Match names a version the cache never reached: it lost changes it had acknowledged
    (a cache restart that kept only part, or nothing, of the last writes). Only a PUT mends it."""

    type = "cluster_behind"
    loc = ("header", "if-match")


class StoppingError(SchedError):
    """Asked to stop before the decision began: another instance (or this one, restarted) answers."""
