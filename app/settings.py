"""Settings from the environment (prefix HPCSCHED_), read once."""

from __future__ import annotations

from functools import lru_cache

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HPCSCHED_")

    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1, description="larger bodies get 413")
    redis_url: str | None = Field(
        None, validation_alias=AliasChoices("HPCSCHED_REDIS_URL", "REDIS_URL")
    )
    log_level: str = "info"
    gc_gen0_threshold: int = Field(
        200_000, ge=0, description="Python GC generation-0 threshold; 0 keeps Python's default. "
        "A big snapshot allocates ~10^5 objects; the default (700) spends a third of the "
        "parse and convert time in the collector",
    )


@lru_cache
def get_settings() -> Settings:
    return Settings()
