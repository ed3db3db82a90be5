"""PEFT (Arabnejad and Barbosa, 2014): HEFT's earliest finish, looking one optimistic step ahead.

The optimistic cost table OCT(v, R) is the longest way from v to an exit task when v runs on R and
every later task gets the group best for it, paying the mean transfer of an edge only when the
group changes:

    OCT(v, R) = max over successors s of  min over Q of  OCT(s, Q) + C(s, Q) + (Q ≠ R) · c̄(v, s)

Ready tasks are taken by decreasing mean OCT (ties: topological position), and each goes to the
group and slot minimising finish time + OCT(v, R), inserted into an idle gap when one is long enough.
"""

from __future__ import annotations

import heapq

import numpy as np

from app.sched.dag import list_kernel
from app.sched.dag.graph import Compiled
from app.sched.dag.heft import Lanes, mean_transfer
from app.sched.dag.model import Late, Plan, Step, check
from app.sched.dag.state import PlanState

NAME = "peft"


def optimistic_costs(c: Compiled) -> np.ndarray:
    """OCT as a (T, G) matrix; 0 for exit tasks."""
    lat, per_byte = mean_transfer(c)
    if list_kernel.COMPILED:
        _, _, _, succ_ptr, succ_idx, succ_data = list_kernel.graph_arrays(c)
        return list_kernel.optimistic_costs(c.cost, lat, per_byte, np.array(c.topo, dtype=np.int64),
                                            succ_ptr, succ_idx, succ_data)
    oct_ = np.zeros((c.n_tasks, c.n_groups))
    for v in reversed(c.topo):
        for s, data in c.succs[v]:
            ahead = oct_[s] + c.cost[s]
            np.maximum(oct_[v], np.minimum(ahead, ahead.min() + lat + data * per_byte), out=oct_[v])
    return oct_


class PeftPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False, late: Late | None = None) -> Plan:
        """PEFT's plan; `late` as for HEFT (asked by the Python loop only)."""
        oct_ = optimistic_costs(c)
        rank = oct_.mean(axis=1) if c.n_groups else np.zeros(c.n_tasks)
        if list_kernel.COMPILED and not explain:
            return Plan(NAME, list_kernel.place_all(c, rank, oct_))
        state = PlanState(c)
        position = {v: i for i, v in enumerate(c.topo)}
        ready = [(-rank[v], position[v], v) for v in state.ready]
        heapq.heapify(ready)
        lanes = Lanes(state)
        steps: list[Step] = []
        placed = 0
        while ready:
            check(late, placed, c.n_tasks)
            placed += 1
            v = heapq.heappop(ready)[2]
            start, finish = lanes.earliest_finish(state.arrival(v), c.cost[v], explain, oct_[v])
            score = finish + oct_[v][lanes.group]
            i = int(np.argmin(score))
            r = int(lanes.group[i])
            for s in state.place(v, r, int(lanes.slot[i]), float(start[i])):
                heapq.heappush(ready, (-rank[s], position[s], s))
            lanes.refresh(i)
            if explain:
                steps.append(Step(v, r, float(score[i]), float(start[i])))
        return Plan(NAME, state.result(), steps)
