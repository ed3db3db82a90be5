"""The built wheel carries what an administrator is told to take from it: the Slurm recipe
(`hpcsched slurm recipe` reads it as package data) and every package of the service."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # pip fetches the build backend into an isolated environment
def test_the_wheel_ships_the_slurm_recipe(tmp_path: Path) -> None:
    src = tmp_path / "src"
    skip = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist", ".hypothesis",
                                  ".pytest_cache", "*.nbi", "*.nbc")
    shutil.copytree(ROOT, src, ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp_path)],
                   check=True, timeout=600)
    wheel = next(tmp_path.glob("hpcsched-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "app/bridges/slurm/job_submit.lua" in names
    assert {"app/main.py", "schemas/schedule.py", "app/bridges/slurm/failsafe.py"} <= names
    assert not [n for n in names if n.startswith("tests/")]
