"""Records made on first read from columns: a sequence a caller that reads only the columns never
pays records for (the running jobs a body sends, the nodes of POST /schedule)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar, overload

R = TypeVar("R")


class LazyRecords(Sequence[R], Generic[R]):
    """Records made on first read from columns a subclass keeps (`_make_records`), then kept: a
    caller that only reads the columns never pays for them. Equal to any sequence of the same
    records, and hashed as their tuple."""

    __slots__ = ("_records",)

    def _make_records(self) -> tuple[R, ...]:
        raise NotImplementedError

    def records(self) -> tuple[R, ...]:
        if self._records is None:
            self._records = self._make_records()
        return self._records

    @overload
    def __getitem__(self, k: int) -> R: ...
    @overload
    def __getitem__(self, k: slice) -> tuple[R, ...]: ...
    def __getitem__(self, k: int | slice) -> R | tuple[R, ...]:
        return self.records()[k]

    def __iter__(self) -> Iterator[R]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self.records() == tuple(other)

    def __hash__(self) -> int:
        return hash(self.records())
