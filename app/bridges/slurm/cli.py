"""`hpcsched slurm`: drive a Slurm cluster with the service as its scheduler.

    hpcsched slurm run [--interval 10] [--url http://svc:8000] [--dry-run] [--policy easy] [--cached ID]
                       [--slurmrestd unix:/run/slurmrestd.sock | http://host:6820 [--token-file F]]
    hpcsched slurm once [--dry-run]          one cycle, then exit
    hpcsched slurm explain JOBID             the last priority, factors, reason and estimate
    hpcsched slurm recipe [--install PATH]   the job_submit.lua (heartbeat path and grace set)
    hpcsched slurm watchdog [--every 30]     hand the bridge's jobs back when it stopped cycling
    hpcsched slurm handback                  hand every job the bridge holds back to Slurm (rollback)

Fail-safe and rollback first: docs/slurm-failsafe.md.

Without --url the service runs in process. Run as root (or SlurmUser) on a host with Slurm's
client programs; `hpcsched slurm recipe` gives the job_submit.lua that holds new jobs for it.

With --slurmrestd, reads, releases, partition moves and comments go through slurmrestd's REST API
(`unix:/path`: local auth; `http(s)://`: JWT from SLURM_JWT or --token-file). Pinning a job to its
nodes still runs `scontrol update` (22.05's REST API refuses `required_nodes`), and so does
reading Slurm's own plan in shadow mode: the client programs are still needed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from app import terminal
from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.cycle import POLL_S, Bridge, CycleReport
from app.bridges.slurm.failsafe import (
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT,
    Heartbeat,
    check,
    hand_back,
    recipe_settings,
    recipe_text,
    render,
    service_probe,
)
from app.bridges.slurm.reconcile import START_BOUND_S
from app.bridges.slurm.rest import RestReader, RestRunner, connect
from app.bridges.slurm.runner import CommandRunner, Runner, SlurmError
from app.bridges.slurm.service import InProcess, in_process, over_http
from app.bridges.slurm.shadow import both_plans, table
from app.bridges.slurm.state import BridgeState, state_path
from schemas.common import NAME_PATTERN, NAME_RULE

slurm_cli = typer.Typer(add_completion=False, help=__doc__, no_args_is_help=True)
console = terminal.console()

Url = Annotated[str | None, typer.Option(help="the service's base URL; default: in process")]
ApiKey = Annotated[str | None, typer.Option(envvar="HPCSCHED_API_KEY", help="X-API-Key for --url")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="shadow mode: change nothing, print both plans")]
Policy = Annotated[str, typer.Option(help="policy name")]
Params = Annotated[str | None, typer.Option(help="policy parameters as a JSON object")]
StatePath = Annotated[Path | None, typer.Option("--state", help="the bridge's state file (default: "
                                                 "$HPCSCHED_SLURM_STATE, else $XDG_STATE_HOME/hpcsched/"
                                                 "slurm-state.json; run and explain agree)")]
StartBound = Annotated[float, typer.Option(help="seconds a released job may stay pending before it is "
                                           "held again, unpinned and decided again")]
Events = Annotated[Path | None, typer.Option("--log", help="append one JSON line per event here")]
Conf = Annotated[str | None, typer.Option(help="slurm.conf to use (default: SLURM_CONF or Slurm's own)")]
Wake = Annotated[bool, typer.Option(help="cycle early when sdiag's job counters move")]
Poll = Annotated[float, typer.Option(help="seconds between looks at sdiag's job counters (with --wake): "
                                     "how soon a submit or a job's end starts a cycle")]
def _cluster_id(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(NAME_PATTERN, value):
        raise typer.BadParameter(f"{value!r}: a cluster id is {NAME_RULE}")
    return value


Cached = Annotated[str | None, typer.Option("--cached", callback=_cluster_id,
                                            help="keep the cluster cached under this id (PUT once, PATCH "
                                            "the changes, send only the pending jobs)")]
Rest = Annotated[str | None, typer.Option("--slurmrestd", help="read and act through slurmrestd at this URL "
                                           "(unix:/path or http(s)://host:port); pins still use scontrol")]
TokenFile = Annotated[Path | None, typer.Option("--token-file", help="file holding the JWT for an http(s) "
                                                "--slurmrestd (default: the SLURM_JWT environment variable)")]
RestUser = Annotated[str | None, typer.Option("--rest-user", help="X-SLURM-USER-NAME for the JWT "
                                              "(default: this process's user)")]
BeatPath = Annotated[Path, typer.Option("--heartbeat", help="the heartbeat file (the recipe's HEARTBEAT): "
                                        "written after each completed cycle, read by recipe and watchdog")]
Grace = Annotated[int, typer.Option("--grace", min=1, help="seconds without a completed cycle before Slurm "
                                    "schedules on its own (the recipe's GRACE_S)")]


def _runner(conf: str | None, slurmrestd: str | None, token_file: Path | None,
            rest_user: str | None) -> Runner:
    """The client programs, or slurmrestd (with the client programs for what it cannot do)."""
    cli = CommandRunner(conf)
    if slurmrestd is None:
        return cli
    token = token_file.read_text().strip() if token_file else os.environ.get("SLURM_JWT")
    try:
        http = connect(slurmrestd, token, rest_user)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--slurmrestd") from exc
    return RestRunner(RestReader(http), cli)


def _bridge(url: str | None, api_key: str | None, dry_run: bool, policy: str, params: str | None,
            state: Path | None, events: Path | None, runner: Runner, cached: str | None = None,
            start_bound: float = START_BOUND_S) -> Bridge:
    spec: dict[str, Any] = {"name": policy, **({"params": json.loads(params)} if params else {})}
    service = over_http(url, api_key) if url else _warmed(in_process())
    cache = CachedCluster(service, cached) if cached else None
    return Bridge(runner, service, BridgeState.load(state_path(state)), spec, dry_run, events, cache,
                  start_bound)


def _warmed(service: InProcess) -> InProcess:
    """The service in process, its decision's compiled loops ready before the first cycle (as the
    service readies them at start): not a queue's first decision stopped for seconds meanwhile."""
    service.warm()
    return service


def _show(bridge: Bridge, rep: CycleReport) -> None:
    if not rep.ok:
        console.print(f"[red]cycle skipped[/red]: {'; '.join(rep.errors)}")
        return
    times = " ".join(f"{k} {v:.0f} ms" for k, v in rep.timing_ms.items())
    pending = len(rep.view.pending) if rep.view else 0
    console.print(f"cycle: {pending} pending sent, started {rep.started or 'none'}, "
                  f"{rep.commands} commands, {len(rep.errors)} errors ({times})")
    if bridge.dry_run and rep.response is not None:
        try:
            slurm_text = bridge.runner.slurm_plan()
        except Exception as exc:  # noqa: BLE001 - Slurm's plan is a courtesy
            console.print(f"(Slurm's own plan not read: {exc})")
            slurm_text = ""
        console.print(table(rep.response, slurm_text))
        bridge.event("shadow", plans=both_plans(rep.response, slurm_text))


@slurm_cli.command()
def run(interval: Annotated[float, typer.Option(help="seconds between cycles")] = 10.0,
        cycles: Annotated[int | None, typer.Option(help="stop after N cycles")] = None,
        url: Url = None, api_key: ApiKey = None, dry_run: DryRun = False, policy: Policy = "easy",
        params: Params = None, state: StatePath = None, log: Events = None,
        conf: Conf = None, cached: Cached = None,
        wake: Wake = True, slurmrestd: Rest = None, token_file: TokenFile = None,
        rest_user: RestUser = None, start_bound: StartBound = START_BOUND_S, poll: Poll = POLL_S,
        heartbeat: BeatPath = DEFAULT_HEARTBEAT, grace: Grace = DEFAULT_GRACE_S) -> None:
    """Cycle forever (or --cycles N): read Slurm, ask the service, apply its answer."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    runner = _runner(conf, slurmrestd, token_file, rest_user)
    bridge = _bridge(url, api_key, dry_run, policy, params, state, log, runner, cached, start_bound)
    bridge.heartbeat = Heartbeat(heartbeat, grace, service_probe(bridge.decide))
    bridge.poll_s = poll

    def shown(rep: CycleReport) -> bool:
        _show(bridge, rep)
        return False

    bridge.loop(interval, cycles, shown, wake)


@slurm_cli.command()
def once(url: Url = None, api_key: ApiKey = None, dry_run: DryRun = False, policy: Policy = "easy",
         params: Params = None, state: StatePath = None, log: Events = None,
         conf: Conf = None, slurmrestd: Rest = None, token_file: TokenFile = None,
         rest_user: RestUser = None, start_bound: StartBound = START_BOUND_S,
         heartbeat: BeatPath = DEFAULT_HEARTBEAT, grace: Grace = DEFAULT_GRACE_S) -> None:
    """One cycle, then exit (exit 1 when it could not read Slurm or reach the service)."""
    runner = _runner(conf, slurmrestd, token_file, rest_user)
    bridge = _bridge(url, api_key, dry_run, policy, params, state, log, runner, start_bound=start_bound)
    bridge.heartbeat = Heartbeat(heartbeat, grace, service_probe(bridge.decide))
    rep = bridge.cycle()
    _show(bridge, rep)
    if not rep.ok:
        raise typer.Exit(1)


@slurm_cli.command()
def explain(job_id: str, state: StatePath = None) -> None:
    """Why a job waits (reason, estimate, priority and factors; a reserved job's start and nodes),
    or where and when the bridge released it, as of the bridge's last cycle (our sprio)."""
    path = state_path(state)
    if not path.exists():
        console.print(f"no bridge state file at {path}: `hpcsched slurm run` has not written one there "
                      "(give the --state it was run with, or set HPCSCHED_SLURM_STATE)")
        raise typer.Exit(2)
    saved = BridgeState.load(path)
    info = saved.explain.get(job_id)
    if info is None and job_id in saved.started:
        info = {"released": True, "at": saved.started[job_id], "cpus": saved.layouts.get(job_id, {})}
    if info is None:
        console.print(f"job {job_id}: not in the bridge's state ({path}): not pending when it last "
                      "cycled, already gone, or never seen")
        raise typer.Exit(1)
    console.print(_explained(job_id, info, saved.held_again.get(job_id)))


def _explained(job_id: str, info: dict[str, Any], held_again: str | None) -> str:
    at = _utc(info.get("at"))
    if info.get("released"):
        cpus = ", ".join(f"{n} ({c} CPUs)" for n, c in (info.get("cpus") or {}).items())
        return f"job {job_id}: released by hpcsched at {at} on {cpus or 'its pinned nodes'}"
    lines = [f"job {job_id}: {info.get('reason')} (as of {at})"]
    if info.get("reason") == "reserved":
        lines.append(f"  reserved start {_utc(info.get('reserved_start'))} on "
                     f"{','.join(info.get('reserved_nodes') or [])}")
    elif info.get("estimated_start") is not None:
        lines.append(f"  estimated start {_utc(info.get('estimated_start'))}")
    for key in ("detail", "queue", "priority", "rank"):
        if info.get(key) not in (None, ""):
            lines.append(f"  {key}: {info[key]}")
    if info.get("factors"):
        lines.append(f"  factors: {json.dumps(info['factors'])}")
    if held_again:
        lines.append(f"  held again: {held_again}")
    return "\n".join(lines)


def _utc(t: float | None) -> str:
    return "?" if t is None else datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@slurm_cli.command()
def recipe(heartbeat: BeatPath = DEFAULT_HEARTBEAT, grace: Grace = DEFAULT_GRACE_S,
           failsafe: Annotated[bool, typer.Option(help="hold nothing when the heartbeat is stale "
                                                  "(--no-failsafe: hold every job, always)")] = True,
           park: Annotated[str, typer.Option(help="park new jobs in this partition (every node, "
                                             "State=DOWN) instead of holding them: they keep Slurm's "
                                             "multifactor priority, which the bridge sends")] = "",
           install: Annotated[Path | None, typer.Option(help="write it here (beside slurm.conf) "
                                                        "instead of printing it")] = None) -> None:
    """The job_submit.lua that holds new jobs for the bridge, with its heartbeat file and grace."""
    try:
        text = render(recipe_text(), heartbeat if failsafe else None, grace, park)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if install is None:
        typer.echo(text, nl=False)
        return
    install.write_text(text)
    install.chmod(0o644)
    console.print(f"wrote {install}; then set JobSubmitPlugins=lua in slurm.conf and `scontrol reconfigure`")


RecipeFile = Annotated[Path | None, typer.Option("--recipe", exists=True, dir_okay=False,
                                                 help="the installed job_submit.lua: take --heartbeat and "
                                                 "--grace from it")]


def _beat(heartbeat: Path, grace: int, installed: Path | None) -> Heartbeat:
    if installed is None:
        return Heartbeat(heartbeat, grace)
    try:
        path, grace = recipe_settings(installed.read_text())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--recipe") from exc
    if path is None:
        raise typer.BadParameter(f"{installed}: its fail-safe is off (HEARTBEAT is empty)",
                                 param_hint="--recipe")
    return Heartbeat(path, grace)


@slurm_cli.command()
def watchdog(heartbeat: BeatPath = DEFAULT_HEARTBEAT, grace: Grace = DEFAULT_GRACE_S,
             installed: RecipeFile = None,
             every: Annotated[float | None, typer.Option(help="check every S seconds, forever (default: "
                                                         "check once, for cron or a timer)")] = None,
             conf: Conf = None, slurmrestd: Rest = None, token_file: TokenFile = None,
             rest_user: RestUser = None) -> None:
    """When the bridge has not completed a cycle within the grace, release every job it holds,
    unpinned, to Slurm's own scheduler (exit 1 when Slurm could not be read or refused a command)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    beat = _beat(heartbeat, grace, installed)
    runner = _runner(conf, slurmrestd, token_file, rest_user)
    while True:
        ok = _watch_once(runner, beat)
        if every is None:
            raise typer.Exit(0 if ok else 1)
        time.sleep(every)


def _watch_once(runner: Runner, beat: Heartbeat) -> bool:
    try:
        seen = check(runner, beat)
    except SlurmError as exc:
        console.print(f"[red]watchdog: Slurm not read[/red]: {exc}")
        return False
    console.print(seen.line())
    return seen.handed is None or not seen.handed.errors


@slurm_cli.command()
def handback(heartbeat: BeatPath = DEFAULT_HEARTBEAT, grace: Grace = DEFAULT_GRACE_S,
             installed: RecipeFile = None,
             force: Annotated[bool, typer.Option(help="even while the bridge still cycles")] = False,
             conf: Conf = None, slurmrestd: Rest = None, token_file: TokenFile = None,
             rest_user: RestUser = None) -> None:
    """Planned rollback: remove the heartbeat (the recipe stops holding new jobs at once) and release
    every job the bridge holds, unpinned, to Slurm's own scheduler. Stop the bridge first."""
    beat = _beat(heartbeat, grace, installed)
    if not beat.stale() and beat.writer_alive() is not False and not force:
        console.print(f"the bridge completed a cycle {beat.age():.0f} s ago and may still run: stop it "
                      "first (it would hold new jobs again), or pass --force")
        raise typer.Exit(2)
    runner = _runner(conf, slurmrestd, token_file, rest_user)
    beat.stop()
    try:
        done = hand_back(runner)
    except SlurmError as exc:
        console.print(f"[red]handback: Slurm not read[/red]: {exc}")
        raise typer.Exit(1) from exc
    console.print(f"handed back to Slurm's own scheduler: {done.summary()}")
    for err in done.errors:
        console.print(f"  {err}")
    if done.errors:
        raise typer.Exit(1)
