"""The service's one exception hierarchy. No web framework here, so the core may raise InputError.

SchedError                    base, never raised directly
├── InputError(ValueError)    422  `errors`: every problem found, each with loc, msg, type
├── NotFoundError             404  unknown plan_id
│   └── ClusterUnknownError   404  unknown or lost cluster_id (type `cluster_unknown`: PUT it again)
├── VersionConflictError      409  stale If-Match
│   └── ClusterBehindError    409  If-Match ahead of the cache: it lost acknowledged changes (PUT again)
├── PayloadTooLargeError      413  body over Settings.max_body_bytes
├── ReplayTooLongError        422  a POST /simulate replay ran past Settings.sim_max_seconds
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


# The one vocabulary of error `type`s: every error body's entries carry one of these, or (for a 422
# of the request's shape) one of pydantic's validation types such as `missing`, `extra_forbidden`,
# `string_pattern_mismatch`. docs/errors.md and the OpenAPI file list them; a test holds the code to it.
ERROR_CODES: dict[str, tuple[int, str]] = {
    # the request as a whole
    "unauthorized": (401, "no valid API key (X-API-Key or Authorization: Bearer)"),
    "not_found": (404, "no such path, or no such plan (never made, expired, or another tenant's)"),
    "cluster_unknown": (404, "the cache holds no such cluster (never PUT, deleted, or lost): PUT it again"),
    "method_not_allowed": (405, "the path exists but not with this method (see `Allow`)"),
    "version_conflict": (409, "If-Match is older than the cluster's version: nothing changed; GET and retry"),
    "cluster_behind": (409, "If-Match is ahead of the cache: it lost acknowledged changes; PUT again"),
    "payload_too_large": (413, "the body is over HPCSCHED_MAX_BODY_BYTES"),
    "unsupported_media_type": (415, "the body is not declared JSON (Content-Type)"),
    "store_unavailable": (503, "the cache store (Redis) cannot be reached; inline requests still work"),
    "stopping": (503, "the service is shutting down before it decided; send the request again"),
    "internal": (500, "a bug: logged with the request id, no internals in the answer"),
    "http_error": (400, "any other refusal of the HTTP layer (status as answered)"),
    # one field of the body (422; `loc` names the field)
    "value_error": (422, "the value breaks a rule the message states"),
    "json_invalid": (422, "the body is not JSON"),
    "missing": (422, "a required value is missing"),
    "duplicate": (422, "a second item with an id already used"),
    "unknown": (422, "a reference to something the request does not hold"),
    "unknown_node": (422, "a node id the snapshot does not hold"),
    "not_in_queues": (422, "a node's `queue` is not one of its `queues`"),
    "over_capacity": (422, "running jobs hold more of a node than it has"),
    "below_running": (422, "a node's size is below what its running jobs hold"),
    "too_many_nodes": (422, "a job asks for more nodes than the cluster (or its queue) has"),
    "too_large": (422, "a count over a documented limit"),
    "too_long": (422, "a list or string longer than allowed"),
    "too_short": (422, "a list or string shorter than required"),
    "conflict": (422, "two fields that contradict each other"),
    "empty_window": (422, "a window whose end is not after its start"),
    "busy": (422, "a node to remove still runs jobs: end them first"),
    "cycle": (422, "the workflow's edges form a cycle"),
    "more_errors": (422, "the last entry of a 422 listing its first 100: how many more, of which types"),
    "no_group": (422, "a task no resource group can run"),
    "bad_split": (422, "the queues' node counts do not add up to the machine's"),
    "swf_syntax": (422, "a line of the SWF trace that cannot be read"),
    "replay_too_long": (422, "a POST /simulate replay ran past HPCSCHED_SIM_MAX_SECONDS and was stopped "
                        "(nothing measured): replay fewer jobs, or use `hpcsched simulate`"),
}


class SchedError(Exception):
    """Base of every error the service answers with a 4xx/5xx on purpose; `type` is its code."""

    type = "internal"


class InputError(SchedError, ValueError):
    def __init__(self, errors: list[ErrorDetail]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in errors))

    @classmethod
    def single(cls, loc: tuple[str | int, ...], msg: str, type_: str = "value_error") -> InputError:
        return cls([ErrorDetail(loc, msg, type_)])


class NotFoundError(SchedError):
    type = "not_found"


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
    type = "version_conflict"


class PayloadTooLargeError(SchedError):
    type = "payload_too_large"


class UnsupportedMediaTypeError(SchedError):
    type = "unsupported_media_type"


class StoreUnavailableError(SchedError):
    type = "store_unavailable"


class ClusterBehindError(VersionConflictError):
    """If-Match names a version the cache never reached: it lost changes it had acknowledged
    (a cache restart that kept only part, or nothing, of the last writes). Only a PUT mends it."""

    type = "cluster_behind"
    loc = ("header", "if-match")


class ReplayTooLongError(SchedError):
    """A POST /simulate replay ran past its time cap: stopped, so its worker thread is free again."""

    type = "replay_too_long"
    loc = ("body",)


class StoppingError(SchedError):
    """Asked to stop before the decision began: another instance (or this one, restarted) answers."""

    type = "stopping"
