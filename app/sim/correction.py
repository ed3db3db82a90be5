"""What a job is told when it runs past its predicted run time (`replay.Predictor`, and the compiled
replay's `_tell_overdue`, with the same arithmetic): its request (`request`, the default), or, after
Tsafrir, Etsion and Feitelson (TPDS 2007, "Backfilling using system-generated predictions rather
than user runtime estimates", §5), `stepwise`: its told time plus the next step of a ladder, at
most its request, and again each time the new told time is up; past the last step, its request."""

from __future__ import annotations

CORRECTIONS = ("request", "stepwise")
STEPS_S = (60.0, 300.0, 900.0, 1_800.0, 3_600.0, 7_200.0, 18_000.0, 36_000.0, 72_000.0, 180_000.0, 360_000.0)


def corrected(told: float, estimate: float, step: int) -> float:
    """The run time told to a job still running after `step` earlier corrections when its told time
    `told` is up: `told` plus the ladder's next step, at most `estimate`."""
    return min(estimate, told + STEPS_S[step]) if step < len(STEPS_S) else estimate


def checked(correction: str) -> str:
    if correction not in CORRECTIONS:
        raise ValueError(f"{correction!r}: the correction is {' or '.join(CORRECTIONS)}")
    return correction
