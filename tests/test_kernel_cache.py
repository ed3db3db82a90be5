"""Where the compiled loops are cached: one folder per version of the loops' source, so an upgrade
that changes a callee never loads a caller compiled with the old one; never a refusal to compile."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

from app import kernel_cache

CALLEE = "from numba import njit\n\n@njit(cache=True)\ndef g(x):\n    return x + {step}\n"
CALLER = ("from numba import njit\nfrom pkg import callee\n\n"
          "@njit(cache=True)\ndef f(x):\n    return callee.g(x)\n")
RUN = ("import sys; sys.path.insert(0, {root!r})\n"
       "from pathlib import Path\n"
       "from app import kernel_cache\n"
       "kernel_cache.use_versioned_folder(package=Path({root!r}) / 'pkg')\n"
       "from pkg import caller\n"
       "print(caller.f(1))\n")


def _run(root: Path, cache: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", kernel_cache.BASE_VARIABLE)}
    env["NUMBA_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-c", RUN.format(root=str(root))], env=env, cwd=Path.cwd(),
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_a_changed_callee_is_never_loaded_through_a_cached_caller(tmp_path: Path) -> None:
    """numba checks a cached loop against its own file only: with one cache folder for every
    version, the caller's cached copy kept the old callee (2 after the callee became x + 100)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(CALLER)
    (package / "callee.py").write_text(CALLEE.format(step=1))
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache) == 2
    assert _run(tmp_path, cache) == 2  # loaded from the cache
    (package / "callee.py").write_text(CALLEE.format(step=100))
    assert _run(tmp_path, cache) == 101
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # one folder per version


def test_the_fingerprint_follows_the_compiled_modules_only(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "loops.py").write_text(CALLEE.format(step=1))
    first = kernel_cache.fingerprint(tmp_path)
    (tmp_path / "plain.py").write_text("x = 2\n")
    assert kernel_cache.fingerprint(tmp_path) == first
    (tmp_path / "loops.py").write_text(CALLEE.format(step=2))
    assert kernel_cache.fingerprint(tmp_path) != first
    assert kernel_cache.compiled_modules(tmp_path) == [tmp_path / "loops.py"]


def test_the_service_package_keys_its_cache_on_its_compiled_modules() -> None:
    names = {p.relative_to(kernel_cache.PACKAGE).as_posix() for p in kernel_cache.compiled_modules()}
    assert {"sched/core_kernel.py", "sched/profile_kernels.py", "sim/compiled.py"} <= names
    assert Path(os.environ["NUMBA_CACHE_DIR"]).name == kernel_cache.fingerprint()


def test_the_base_folder_is_the_operators_else_a_writable_place(tmp_path: Path) -> None:
    """A folder set by the administrator is kept (and carried to child processes, whose
    NUMBA_CACHE_DIR already names the versioned folder); where neither the code's folder nor the
    home can be written (a system-wide install run by a user without a home), numba would refuse
    to compile at all: then a folder of the temporary directory."""
    environ = {"NUMBA_CACHE_DIR": "/srv/numba-cache"}
    folder = kernel_cache.use_versioned_folder(environ, tmp_path)
    assert folder.parent == Path("/srv/numba-cache")
    assert kernel_cache.use_versioned_folder(dict(environ), tmp_path) == folder  # a child process
    assert kernel_cache.base_folder({}, tmp_path) == tmp_path / "__pycache__" / "kernels"
    with mock.patch.object(kernel_cache.os, "access", return_value=False):
        chosen = kernel_cache.base_folder({"HOME": str(tmp_path)}, tmp_path)
    assert chosen.parent == Path(tempfile.gettempdir()) and chosen.name.startswith("hpcsched-kernels-")
    with mock.patch.object(kernel_cache.os, "access", side_effect=lambda p, mode: p == tmp_path):
        assert kernel_cache.base_folder({"HOME": str(tmp_path)}, tmp_path / "ro") == \
            tmp_path / ".cache" / "hpcsched" / "kernels"
