"""A plan as an SVG Gantt chart: one row per lane of a group, one bar per task, the critical path in red.

Lanes are assigned here, for drawing only: a group's tasks in start order, each on its first lane
free by then (done tasks have no known slot, so their slot cannot be used).
"""

from __future__ import annotations

from collections import defaultdict
from xml.sax.saxutils import escape, quoteattr

from schemas.dag import DagPlanResponse, TaskPlanOut

ROW_H, BAR_H, LEFT, WIDTH, TOP = 18, 14, 140, 1000, 30
FILL = {"done": "#9e9e9e", "running": "#f2a541", "planned": "#4f81bd"}


def _lanes(tasks: list[TaskPlanOut]) -> list[tuple[TaskPlanOut, int]]:
    ends: list[float] = []
    placed = []
    for t in sorted(tasks, key=lambda t: (t.start, t.finish, t.id)):
        lane = next((i for i, end in enumerate(ends) if end <= t.start), len(ends))
        if lane == len(ends):
            ends.append(t.finish)
        ends[lane] = t.finish
        placed.append((t, lane))
    return placed


def gantt_svg(plan: DagPlanResponse) -> str:
    by_group: dict[str, list[TaskPlanOut]] = defaultdict(list)
    for t in plan.tasks:
        by_group[t.group].append(t)
    t0 = min((t.start for t in plan.tasks), default=plan.now)
    span = max(plan.finish - t0, 1e-9)
    scale = WIDTH / span
    rows, bars, y = [], [], TOP
    for gid in plan.groups:
        placed = _lanes(by_group.get(gid, []))
        n_lanes = max((lane for _, lane in placed), default=0) + 1
        rows.append(f'<text class="group" x="4" y="{y + ROW_H * n_lanes / 2 + 4:.1f}">{escape(gid)}</text>'
                    f'<line x1="0" x2="{LEFT + WIDTH}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        for t, lane in placed:
            x, w = LEFT + (t.start - t0) * scale, (t.finish - t.start) * scale
            bars.append(_bar(t, x, y + lane * ROW_H + 2, w))
        y += ROW_H * n_lanes
    title = (f"{plan.used}: makespan {plan.makespan:.6g} s, {len(plan.tasks)} tasks, "
             f"critical path of {len(plan.critical_path)}")
    height = y + 20
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 10}" height="{height}" '
        f'font-family="sans-serif" font-size="11">'
        f'<title>{escape(title)}</title><text x="4" y="16" font-size="13">{escape(title)}</text>'
        + "".join(rows) + "".join(bars) + "</svg>"
    )


def _bar(t: TaskPlanOut, x: float, y: float, w: float) -> str:
    stroke = ' stroke="#d62728" stroke-width="2"' if t.critical else ""
    label = f"{t.id} [{t.status}] {t.start:.6g} → {t.finish:.6g}"
    return (f'<rect class="task{" critical" if t.critical else ""}" data-task={quoteattr(t.id)} '
            f'x="{x:.2f}" y="{y:.1f}" width="{max(w, 0.5):.2f}" height="{BAR_H}" '
            f'fill="{FILL[t.status]}"{stroke}><title>{escape(label)}</title></rect>')
