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


@lru_cache
def get_settings() -> Settings:
    return Settings()
