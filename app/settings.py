"""Settings from the environment (prefix HPCSCHED_), read once."""

from __future__ import annotations

from functools import lru_cache

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HPCSCHED_", populate_by_name=True)

    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1, description="larger bodies get 413")
    redis_url: str | None = Field(
        None, validation_alias=AliasChoices("HPCSCHED_REDIS_URL", "REDIS_URL")
    )
    log_level: str = "info"
    workers: int = Field(2, ge=1, description="uvicorn worker processes (the container's command reads it)")
    api_keys: str | None = Field(
        None, description="`tenant=key` pairs, comma-separated; set, every non-public request needs a key")
    cors_origins: str | None = Field(
        None, description="origins (comma-separated) whose browser pages may call the API "
        "(CORS, e.g. a portal calling /dag/plan); none by default")
    plan_ttl_s: int = Field(3600, ge=1, description="how long GET /dag/plan/{id} finds a plan")
    sim_max_jobs: int = Field(20_000, ge=1, description="POST /simulate refuses longer traces")
    sim_max_seconds: float = Field(
        60.0, gt=0, description="seconds a POST /simulate replay may run; past them it is stopped and "
        "the request answered 422 `replay_too_long` (the `hpcsched simulate` command has no cap)")
    dag_max_tasks: int = Field(20_000, ge=1, description="larger workflows get 422")
    dag_max_cells: int = Field(
        4_000_000, ge=1, description="tasks × groups above this get 422 (the planners keep matrices of it)")
    decision_time_s: float | None = Field(
        10.0, gt=0, description="seconds a POST /schedule decision may take from its body's arrival "
        "(like Slurm's bf_max_time); jobs not looked at by then are answered `not_evaluated`. "
        "It also bounds how long a shutdown waits for a decision in flight.")
    decision_max_jobs: int | None = Field(
        100_000, ge=1, description="pending jobs one decision may look at (like Slurm's "
        "bf_max_job_test); the rest are `not_evaluated`.")
    dag_max_search_s: float = Field(
        2.0, ge=0, description="ceiling of a /dag/plan search budget (time_budget_s or its default)")
    dag_best_default_s: float = Field(
        0.8, ge=0, description="/dag/plan `best` without time_budget_s: its planning (from when the body "
        "is parsed and checked) keeps within this (and dag_max_search_s); the first planner always runs")
    gc_gen0_threshold: int = Field(
        200_000, ge=0, description="Python GC generation-0 threshold; 0 keeps Python's default. "
        "A big snapshot allocates ~10^5 objects; the default (700) spends a third of the "
        "parse and convert time in the collector. POST /schedule raises it further while it reads "
        "a body (one per 8 bytes: a 14 MB snapshot is ~10^6 objects)",
    )


@lru_cache
def get_settings() -> Settings:
    return Settings()
