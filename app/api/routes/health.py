"""Liveness."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()


@router.get("/healthz", summary="The process is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
