"""Node selectors by name (docs/methods.md §1, §4, §5)."""

from __future__ import annotations

from app.sched.selectors.base import NodeView, Selector
from app.sched.selectors.evaluation import EvaluationSelector
from app.sched.selectors.first_fit import FirstFitSelector
from app.sched.selectors.fragment import FragmentSelector
from app.sched.selectors.least_load import LeastLoadSelector

SELECTORS: dict[str, type[Selector]] = {
    s.NAME: s for s in (FirstFitSelector, LeastLoadSelector, EvaluationSelector, FragmentSelector)
}

__all__ = ["SELECTORS", "NodeView", "Selector"]
