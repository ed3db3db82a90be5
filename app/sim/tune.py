"""Tune a policy on a site's own trace: search settings on one part, judge the choice on the next.

A *setting* is a policy block as `POST /schedule` takes it (`{"name": ..., "params": {...}}`) plus
whether the scheduler is told predicted run times. Validation is rolling (`rolling`): the trace is
cut, in submit order, into `folds + 1` consecutive windows; fold i chooses on window i (*train*) and
is judged on window i + 1 (*held out*), so every window but the first is held out once and no fold
judges on a job it chose on. Within a fold, every setting of the space is replayed on the train
window and the choice is made from those results alone (`choose` reads nothing else: tested); only
then are the chosen setting and the two baselines (EASY, FirstFit) replayed on the held-out window.

A setting is eligible in fold k only if its guard held on every train window 1..k (`choose`'s
`earlier`; `GUARD_WINDOWS` "all", the default; "latest": window k only).

Objectives: `guarded` (the default: the lowest mean bounded slowdown among the settings whose
longest wait and 99th-percentile wait stay within `max` and `p99` times EASY's on the train window,
2 and 1 unless `guarded:max=3,p99=1.5` says otherwise; EASY itself always qualifies), `bsld` (mean
bounded slowdown, no guard), `wait` (mean wait), `mix:bsld=0.7,wait=0.3` (a weighted sum of the
measures, each divided by EASY's on the train part so units do not weigh), `maxwait-cap:SECONDS`
(the lowest mean bsld among the settings whose longest wait stays under the cap; the shortest
longest wait when none does).

A choice *beats EASY* on a held-out window when its mean bsld is lower than EASY's there and the
guard holds there (its longest and p99 waits within the factors of EASY's on that window, a factor
under 1 taken as 1: such a factor is a margin asked of the train window only, `judged`); a choice
breaking the guard on a held-out window is flagged. `verdict` recommends the latest fold's choice
only when every fold's choice beats EASY on its held-out window; otherwise it says to keep EASY.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.sim.correction import checked
from app.sim.metrics import BSLD_BOUND_S, run_metrics
from app.sim.replay import ReplayResult, Times, replay_times
from app.sim.workload import Workload

# The default space: orders, bounded reservation depths (on a long queue the weighted order or
# `conservative` searches a reservation for most waiting jobs at every decision: lublin_256 takes one
# to three minutes a replay that way, against a second here; a standing order at an unlimited depth
# replays fast, its pass stopping at the last job that may start), backfill orders, predictions
# and two time grains, all on `priority`, whose plain orders reserve the first `reservation_depth`
# blocked jobs (order=fcfs, depth 1 is EASY); and the aging term's wait cap (none, or 1 hour to 4
# days: where it pays depends on how long the site's queue is), which ranks a job that waited it
# first. It changes nothing under fcfs (the aged jobs go first come, first served), so `settings`
# gives fcfs none.
DEFAULT_SPACE: dict[str, list[Any]] = {
    "order": ["fcfs", "sjf", "f1"],
    "reservation_depth": [1, 2, 4],
    "backfill_order": ["priority", "sjf"],
    "selector": ["first_fit"],
    "time_grain_s": [1, 60],
    "predicted": [False, True],
    "wait_cap_s": [None, 3_600, 14_400, 43_200, 86_400, 172_800, 345_600],
}
MARGIN = 0.05  # to be recommended, every fold's choice beats EASY's train measure by at least this share
MAX_RESERVATION_DEPTH = 16  # the largest depth a space may ask for: see DEFAULT_SPACE
EASY = {"name": "easy", "params": {"time_grain_s": 1}}
FIRSTFIT = {"name": "firstfit", "params": {"time_grain_s": 1}}
SHORT = {"reservation_depth": "depth", "backfill_order": "bf", "time_grain_s": "grain", "wait_cap_s": "cap",
         "reserve_xfactor": "xf"}
MEASURES = ("bsld", "wait", "utilisation", "bsld_worst1", "wait_worst1", "wait_p99", "wait_max")
OUT_OF_BOUNDS = 1e12  # a score past this: outside the guard or the cap (ranked after every one inside)
GUARD = {"max": 2.0, "p99": 1.0}  # the default guard: longest wait <= 2x EASY's, p99 wait <= EASY's


@dataclass(frozen=True, slots=True)
class Setting:
    policy: Mapping[str, Any]  # the policy block of POST /schedule
    predicted: bool = False
    correction: str = "request"  # with predicted: what an overdue job is told (`app.sim.correction`)

    @property
    def key(self) -> str:
        """A stable name: the same setting has the same key in every run (the resume file uses it; the
        default correction is left out, so results made before it existed are still found)."""
        fields: dict[str, Any] = {"policy": self.policy, "predicted": self.predicted}
        if self.correction != "request":
            fields["correction"] = self.correction
        return json.dumps(fields, sort_keys=True)

    def label(self) -> str:
        """A short name for tables: `priority order=f1 depth=2 bf=sjf grain=60 predicted stepwise`."""
        params = " ".join(f"{SHORT.get(k, k)}={v}" for k, v in sorted(self.policy.get("params", {}).items())
                          if k != "selector" or v != "first_fit")
        told = "predicted" + (f" {self.correction}" if self.correction != "request" else "")
        return " ".join(x for x in (str(self.policy["name"]), params, told * self.predicted) if x)


def setting(policy: Mapping[str, Any], predicted: bool = False, correction: str = "request") -> Setting:
    """A setting, its correction checked and kept only where run times are predicted (it reads none
    otherwise: one setting, not two)."""
    return Setting(policy, predicted, checked(correction) if predicted else "request")


# --- the fitted order's weights, searched per train window by simulation (docs/methods.md §3) -------
# fit_r stays 1 (the order is the same for any positive multiple of the weights); the search moves
# fit_n, fit_rn and log10(fit_s) within these bounds (fit_s from 1e-4 per hour, almost no aging, to 10
# per hour, almost first come, first served)
FIT_BOUNDS = {"fit_n": (-2.0, 3.0), "fit_rn": (-1.0, 1.0), "log_fit_s": (-4.0, 1.0)}
FIT_STEP = {"fit_n": 0.5, "fit_rn": 0.25, "log_fit_s": 0.5}  # the pattern search's first steps
FIT_BUDGET = 40  # replays per train window: FIT_START random weights, then pattern-search rounds
FIT_START = 16
FIT_SEED = 33


def fit_base(objective: Objective, pool: Iterable[Setting], train: Mapping[str, Measures],
             baseline_key: str) -> Setting:
    """The setting the fitted order is fitted into: the best `priority` setting on the train results
    (ties: the smaller key), its reservation depth, backfill order, grain, selector and predictions
    kept, its order and wait cap dropped (the fitted score carries its own aging)."""
    base = train[baseline_key]
    best = min((s for s in pool if s.policy["name"] == "priority"),
               key=lambda s: (score(objective, train[s.key], base), s.key))
    params = {k: v for k, v in best.policy.get("params", {}).items()
              if k not in ("order", "wait_cap_s", *FIT_BOUNDS, "fit_r", "fit_s")}
    return Setting({"name": "priority", "params": params}, best.predicted, best.correction)


def fitted(base: Setting, point: Mapping[str, float]) -> Setting:
    """The fitted order with the weights of a search point (fit_n, fit_rn, log10 fit_s), each
    rounded to 3 significant digits (short labels, stable keys), in `base`'s setting."""
    weights = {"fit_r": 1.0, "fit_n": point["fit_n"], "fit_rn": point["fit_rn"],
               "fit_s": 10.0 ** point["log_fit_s"]}
    params = {**base.policy["params"], "order": "fitted"}
    params |= {k: float(f"{v:.3g}") for k, v in weights.items()}
    return Setting({"name": "priority", "params": params}, base.predicted, base.correction)


def point_of(s: Setting) -> dict[str, float]:
    """The search point of a fitted setting (`fitted`'s inverse)."""
    p = s.policy["params"]
    return {"fit_n": p["fit_n"], "fit_rn": p["fit_rn"], "log_fit_s": math.log10(p["fit_s"])}


def first_points(k: int = FIT_START, seed: int = FIT_SEED) -> list[dict[str, float]]:
    """The search's start: shortest first with little aging, then k - 1 points drawn uniformly
    within the bounds (the same for every train window and run)."""
    rng = np.random.default_rng(seed)
    points = [{"fit_n": 0.0, "fit_rn": 0.0, "log_fit_s": -2.0}]
    for _ in range(k - 1):
        points.append({key: float(rng.uniform(lo, hi)) for key, (lo, hi) in FIT_BOUNDS.items()})
    return points[:k]


def neighbours(point: Mapping[str, float], step: Mapping[str, float]) -> list[dict[str, float]]:
    """The pattern search's next points: one step up and down along each weight, within bounds."""
    out = []
    for key, (lo, hi) in FIT_BOUNDS.items():
        for sign in (1, -1):
            moved = min(hi, max(lo, point[key] + sign * step[key]))
            if moved != point[key]:
                out.append({**point, key: moved})
    return out


def parse_space(text: str) -> dict[str, list[Any]]:
    """"order=fcfs,f1;reservation_depth=1,2" -> the default space with those dimensions replaced.
    Values are read as JSON where they parse (numbers, true/false), else as text."""
    space = dict(DEFAULT_SPACE)
    for part in (p.strip() for p in text.split(";") if p.strip()):
        key, sep, values = part.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"{part!r}: expected key=v1,v2")
        space[key.strip()] = [_value(v.strip()) for v in values.split(",")]
    return space


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def settings(space: Mapping[str, list[Any]]) -> list[Setting]:
    """Every combination of the space, as `priority` settings (deduplicated, in a stable order). A
    wait cap of None, or under order=fcfs (where aging changes nothing), is left out of the block;
    `predicted` and `correction` (request | stepwise, read only where predicted) are the replay's."""
    depth = max((d for d in space.get("reservation_depth", [1]) if isinstance(d, int)), default=1)
    if depth > MAX_RESERVATION_DEPTH:
        raise ValueError(f"reservation_depth {depth} is over {MAX_RESERVATION_DEPTH}: an unbounded depth "
                         "can take minutes per decision on a long queue")
    keys = sorted(space)
    out: dict[str, Setting] = {}
    for values in itertools.product(*(space[k] for k in keys)):
        params = dict(zip(keys, values, strict=True))
        predicted = bool(params.pop("predicted", False))
        correction = str(params.pop("correction", "request"))
        if params.get("wait_cap_s", 0) is None or params.get("order") == "fcfs":
            params.pop("wait_cap_s", None)
        if params.get("reserve_xfactor", 0) is None:  # (the key a setting had before the parameter)
            params.pop("reserve_xfactor")
        s = setting({"name": "priority", "params": params}, predicted, correction)
        out.setdefault(s.key, s)
    return list(out.values())


def rolling(w: Workload, folds: int) -> list[tuple[Workload, Workload]]:
    """(train, held out) per fold: the jobs cut in submit order into `folds + 1` consecutive windows
    of (nearly) equal size; fold i trains on window i and is judged on window i + 1. Each window is
    replayed from an empty machine."""
    if folds < 1:
        raise ValueError("at least one fold")
    n = len(w.jobs)
    cuts = [round(k * n / (folds + 1)) for k in range(folds + 2)]
    if min(b - a for a, b in itertools.pairwise(cuts)) < 2:
        raise ValueError(f"{n} jobs cannot be cut into {folds + 1} windows of at least 2 jobs")
    windows = [Workload(w.machine, w.jobs[a:b], w.notes) for a, b in itertools.pairwise(cuts)]
    return list(itertools.pairwise(windows))


def fingerprint(w: Workload, extra: Mapping[str, Any]) -> str:
    """What a result depends on besides its setting: the jobs, the machine and `extra`."""
    h = hashlib.sha256(repr((w.machine, sorted(extra.items()))).encode())
    for j in w.jobs:
        h.update(repr((j.id, j.submit, j.run, j.estimate, j.nodes, j.cpu, j.mem_mib, j.user)).encode())
    return h.hexdigest()[:16]


def measures(result: ReplayResult, w: Workload) -> dict[str, float]:
    """The measures an objective reads, and the report's: means, utilisation, the worst-off 1 %."""
    m = run_metrics(result, w.machine)
    waits = np.array([r.start - r.job.submit for r in result.records])
    runs = np.array([r.end - r.start for r in result.records])
    bslds = np.maximum(1.0, (waits + runs) / np.maximum(runs, BSLD_BOUND_S))
    return {"bsld": m.get("bsld_mean", math.inf), "wait": m.get("wait_mean", math.inf),
            "utilisation": m.get("utilisation", 0.0), "bsld_worst1": _worst(bslds),
            "wait_worst1": _worst(waits), "wait_p99": m.get("wait_p99", math.inf),
            "wait_max": float(waits.max()) if waits.size else math.inf,
            "unstarted": float(len(result.unstarted)), "jobs": float(len(result.records))}


def times_measures(times: Times, w: Workload) -> dict[str, float]:
    """`measures` from a replay's `Times` alone: the same arithmetic on the same values in the same
    order (the started jobs in the order they started), so the same figures to the last bit (tested
    against `measures` of `replay`'s records)."""
    o = times.order
    if o.size == 0:
        return {"bsld": math.inf, "wait": math.inf, "utilisation": 0.0, "bsld_worst1": math.inf,
                "wait_worst1": math.inf, "wait_p99": math.inf, "wait_max": math.inf,
                "unstarted": float(len(w.jobs)), "jobs": 0.0}
    submit = np.array([j.submit for j in w.jobs])[o]
    start, end = times.start[o], times.end[o]
    cpu, nodes = np.array([[j.cpu, j.nodes] for j in w.jobs]).T[:, o]
    waits, runs = start - submit, end - start
    bslds = np.maximum(1.0, (waits + runs) / np.maximum(runs, BSLD_BOUND_S))
    first, last = float(submit.min()), float(end.max())
    busy = sum(((end - start) * cpu * nodes).tolist())  # (run_metrics' sum, term for term)
    return {"bsld": float(bslds.mean()), "wait": float(waits.mean()),
            "utilisation": busy / (w.machine.cores * (last - first)) if last > first else 0.0,
            "bsld_worst1": _worst(bslds), "wait_worst1": _worst(waits),
            "wait_p99": float(np.percentile(waits, 99)), "wait_max": float(waits.max()),
            "unstarted": float(len(w.jobs) - o.size), "jobs": float(o.size)}


def _worst(values: np.ndarray) -> float:
    """The mean of the worst 1 % of the values (at least one)."""
    if values.size == 0:
        return math.inf
    k = max(1, math.ceil(values.size / 100))
    return float(np.sort(values)[-k:].mean())


def evaluate(w: Workload, setting: Setting, detail: bool = False) -> dict[str, Any]:
    """Replay `w` under `setting` (on whatever process runs it: a Dask worker, or this one)."""
    import time

    name, params = params_of(setting.policy)
    t0, c0 = time.perf_counter(), time.process_time()
    times = replay_times(w, name, params, predict=setting.predicted, correction=setting.correction)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out: dict[str, Any] = {"measures": times_measures(times, w), "seconds": seconds, "cpu_seconds": cpu}
    if detail:
        submit = np.array([j.submit for j in w.jobs])
        out["waits"] = (times.start - submit)[times.order].tolist()
    return out


def params_of(policy: Mapping[str, Any]) -> tuple[str, Any]:
    """A policy block validated by the wire model of POST /schedule, as the core's parameters.
    Raises pydantic's ValidationError naming the bad field."""
    from pydantic import TypeAdapter  # the wire models only where a setting is checked or replayed

    from app.convert import params_from_wire
    from schemas.policies import PolicySpec

    return params_from_wire(TypeAdapter(PolicySpec).validate_python(policy))


@dataclass(frozen=True, slots=True)
class Objective:
    kind: str  # guarded | bsld | wait | mix | maxwait-cap
    weights: tuple[tuple[str, float], ...] = ()
    cap_s: float = math.inf
    max_factor: float = GUARD["max"]  # the guard: longest wait within this many times EASY's
    p99_factor: float = GUARD["p99"]  # ... and the 99th-percentile wait within this many

    def describe(self) -> str:
        if self.kind == "mix":
            return "mix: " + " + ".join(f"{w:g}·{m}/EASY" for m, w in self.weights)
        if self.kind == "maxwait-cap":
            return f"lowest mean bsld with every wait under {self.cap_s:,.0f} s"
        if self.kind == "guarded":
            return f"lowest mean bsld with {self.guard_text()}"
        return f"lowest mean {self.kind}"

    def guard_text(self) -> str:
        return (f"longest wait <= {self.max_factor:g}x EASY's and p99 wait <= {self.p99_factor:g}x "
                "EASY's")


def parse_objective(text: str) -> Objective:
    kind, _, rest = text.partition(":")
    if kind in ("bsld", "wait") and not rest:
        return Objective(kind)
    if kind == "guarded":
        return _guarded(rest)
    if kind == "mix":
        weights = []
        for part in rest.split(","):
            m, sep, w = part.partition("=")
            if not sep or m.strip() not in MEASURES:
                raise ValueError(f"mix: {part!r} is not measure=weight, a measure among "
                                 f"{', '.join(MEASURES)}")
            weights.append((m.strip(), float(w)))
        return Objective("mix", tuple(weights))
    if kind == "maxwait-cap":
        try:
            return Objective(kind, cap_s=float(rest))
        except ValueError:
            raise ValueError("maxwait-cap:SECONDS, e.g. maxwait-cap:86400") from None
    raise ValueError(f"{text!r}: the objective is guarded, guarded:max=2,p99=1, bsld, wait, "
                     "mix:bsld=0.7,wait=0.3 or maxwait-cap:SECONDS")


def _guarded(rest: str) -> Objective:
    """`guarded:max=2,p99=1`: each factor finite and above 0. A factor under 1 asks the train window
    for a tail shorter than EASY's (a margin for the next window; EASY itself still qualifies)."""
    factors = dict(GUARD)
    for part in (p.strip() for p in rest.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        try:
            factor = float(value)
        except ValueError:
            factor = math.nan
        if not sep or key.strip() not in GUARD or not factor > 0 or math.isinf(factor):
            raise ValueError(f"guarded: {part!r} is not max=F or p99=F with a finite factor F > 0")
        factors[key.strip()] = factor
    return Objective("guarded", max_factor=factors["max"], p99_factor=factors["p99"])


def judged(objective: Objective) -> Objective:
    """The guard a choice is judged by on a held-out window: the objective's factors, none under 1 (a
    factor under 1 is a margin asked of the train window; held out, no worse than EASY is the bar)."""
    return replace(objective, max_factor=max(objective.max_factor, 1.0),
                   p99_factor=max(objective.p99_factor, 1.0))


def guard_holds(objective: Objective, m: Mapping[str, float], easy: Mapping[str, float]) -> bool:
    """Whether the longest and p99 waits stay within the objective's factors of EASY's (the default
    factors for an objective without a guard of its own)."""
    return (m["wait_max"] <= objective.max_factor * easy["wait_max"]
            and m["wait_p99"] <= objective.p99_factor * easy["wait_p99"])


def score(objective: Objective, m: Mapping[str, float], baseline: Mapping[str, float]) -> float:
    """Lower is better. A replay that left jobs unstarted scores infinity."""
    if m.get("unstarted", 0.0) > 0:
        return math.inf
    if objective.kind == "mix":
        return sum(w * m[k] / max(baseline[k], 1e-9) for k, w in objective.weights)
    if objective.kind == "maxwait-cap":
        over = m["wait_max"] > objective.cap_s
        return OUT_OF_BOUNDS + m["wait_max"] if over else m["bsld"]
    if objective.kind == "guarded":  # EASY itself qualifies, whatever the factors
        inside = m == baseline or guard_holds(objective, m, baseline)
        return m["bsld"] if inside else OUT_OF_BOUNDS + m["bsld"]
    return m[objective.kind]


GUARD_WINDOWS = ("all", "latest")  # the train windows a setting's guard must have held on to be chosen


def check_guard_windows(text: str) -> str:
    if text not in GUARD_WINDOWS:
        raise ValueError(f"{text!r}: the guard windows are {' or '.join(GUARD_WINDOWS)}")
    return text


def choose(objective: Objective, train: Mapping[str, Mapping[str, float]], baseline_key: str,
           earlier: Iterable[Mapping[str, Mapping[str, float]]] = ()) -> str:
    """The key of the best setting on the train results (ties: the smaller key). Reads nothing else.
    `earlier`: the results on the earlier train windows (the `all` rule of `GUARD_WINDOWS`); a
    setting is then eligible only if its guard held on each of them (`held_on`), EASY always."""
    base = train[baseline_key]
    eligible = [k for k in train if held_on(objective, k, earlier, baseline_key)]
    return min(eligible, key=lambda k: (score(objective, train[k], base), k))


def held_on(objective: Objective, key: str, earlier: Iterable[Mapping[str, Mapping[str, float]]],
            baseline_key: str) -> bool:
    """Whether setting `key` was within the objective's bounds on every window of `earlier`: started
    every job, and kept the guard (`guarded`) or the cap (`maxwait-cap`); a window without its result
    counts as broken. EASY always holds."""
    return all(key in window and score(objective, window[key], window[baseline_key]) < OUT_OF_BOUNDS
               for window in earlier)


def still_open(objective: Objective, keys: Iterable[str], earlier: Sequence[Mapping[str, Measures]],
               baseline_key: str) -> list[str]:
    """The settings of `keys` that a fold after the `earlier` train windows may still choose under the
    `all` rule of `GUARD_WINDOWS`: those within the objective's bounds on each of them (`held_on`; a
    window without a setting's result counts as broken, so a setting left out once stays out). The
    others need no replay on the next train window: `choose` and `missing_before` with `earlier`
    read none of their results there (tested), and the fitted order is fitted into the best of the
    open ones (`fit_base`)."""
    return [k for k in keys if held_on(objective, k, earlier, baseline_key)]


def missing_before(objective: Objective, train: Mapping[str, Mapping[str, float]], baseline_key: str,
                   earlier: Sequence[Mapping[str, Mapping[str, float]]], limit: int) -> list[str]:
    """The settings (at most `limit`, best first) that would be chosen before the current choice if
    their results on the earlier windows, missing now, showed the guard held there: what to replay
    next before `choose` with `earlier` can be trusted (empty: it can)."""
    current = choose(objective, train, baseline_key, earlier)
    base = train[baseline_key]
    rank = (score(objective, train[current], base), current)
    ahead = sorted((k for k in train if (score(objective, train[k], base), k) < rank),
                   key=lambda k: (score(objective, train[k], base), k))
    known = [[w for w in earlier if k in w] for k in ahead]
    return [k for k, seen in zip(ahead, known, strict=True)
            if len(seen) < len(earlier) and held_on(objective, k, seen, baseline_key)][:limit]


def main_measure(objective: Objective) -> str:
    """The measure a gain is told in: the objective's own, mean bsld for a mix, a cap or the guard."""
    return "bsld" if objective.kind in ("mix", "maxwait-cap", "guarded") else objective.kind


def gain(objective: Objective, chosen: Mapping[str, float], easy: Mapping[str, float]) -> float:
    """How much lower the objective's main measure is than EASY's, as a share (0.25 = 25 % lower)."""
    measure = main_measure(objective)
    return 1 - chosen[measure] / easy[measure] if easy[measure] else 0.0


def beats_easy(objective: Objective, chosen: Mapping[str, float], easy: Mapping[str, float]) -> bool:
    """On one held-out window: a lower mean bsld than EASY's, and the guard holds there."""
    return (chosen.get("unstarted", 0.0) == 0 and chosen["bsld"] < easy["bsld"]
            and guard_holds(judged(objective), chosen, easy))


Measures = Mapping[str, float]


def verdict(objective: Objective, held: list[tuple[Measures, Measures]],
            train_gains: list[float] | None = None, margin: float = 0.0) -> tuple[bool, str]:
    """(recommend, why) from each fold's held-out (chosen, EASY) measures and the choice's gain over
    EASY on its train window (`gain`): recommend the latest fold's choice only when every fold's
    choice was at least `margin` better than EASY on its train window (the safety margin) and beats
    EASY on its held-out window."""
    gains = train_gains if train_gains is not None else [math.inf] * len(held)
    short = [i + 1 for i, g in enumerate(gains) if not g >= margin]
    lost = [i + 1 for i, (c, e) in enumerate(held) if not beats_easy(objective, c, e)]
    if not short and not lost:
        return True, (f"on all {len(held)} train windows the choice was at least {margin:.0%} better than "
                      f"EASY, and on all {len(held)} held-out windows it had a lower mean bsld than EASY "
                      f"with {judged(objective).guard_text()}")
    why = []
    if short:
        why.append(f"on train window(s) {_listed(short)} of {len(held)} the choice was not at least "
                   f"{margin:.0%} better than EASY (the margin)")
    if lost:
        why.append(f"on held-out window(s) {_listed(lost)} of {len(held)} the choice did not have both a "
                   f"lower mean bsld than EASY and {judged(objective).guard_text()}")
    return False, "keep EASY: " + "; ".join(why)


def _listed(folds: list[int]) -> str:
    return ", ".join(map(str, folds))


def read_done(lines: Iterable[str], stamp: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The results of an earlier run (JSONL) made on the same workload (`stamp`), by (part, key)."""
    done = {}
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short when the run was stopped
            continue
        if isinstance(rec, dict) and rec.get("stamp") == stamp:
            done[(rec["part"], rec["key"])] = rec
    return done
