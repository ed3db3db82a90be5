"""Where numba keeps the compiled loops: one folder per version of the loops' source.

numba checks a cached loop against its own file only. A loop that calls a loop of another module
(`compiled` calls `core_kernel`, which calls `profile_kernels`) has the callee compiled into it, so
after an upgrade that changed only the callee, the caller's cache would still load, with the old
callee inside: the service would decide with code it no longer ships. Keying the whole cache on
a fingerprint of every module that compiles loops makes any change to any of them start a fresh
folder, and the loops compile once more (the service warms them before it answers).

The base folder is the operator's `NUMBA_CACHE_DIR` if set; else a folder beside the code where it
can be written, else the user's cache folder, else a folder of the temporary directory (a
system-wide install run by a user without a home: numba would otherwise refuse to compile).
`HPCSCHED_KERNEL_CACHE_BASE` carries the base to child processes (Dask workers, uvicorn's), which
inherit `NUMBA_CACHE_DIR` already pointing at the versioned folder.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).parent
BASE_VARIABLE = "HPCSCHED_KERNEL_CACHE_BASE"


def compiled_modules(package: Path = PACKAGE) -> list[Path]:
    """The package's modules that cache compiled loops (their text says `cache=True`), in a fixed
    order. A loop compiled without a cache compiles afresh in every process, with its callees as
    they are now."""
    return sorted(p for p in package.rglob("*.py") if "cache" + "=True" in p.read_text(encoding="utf-8"))


def fingerprint(package: Path = PACKAGE) -> str:
    """A short digest of the compiled modules' paths (relative to the package) and contents."""
    digest = hashlib.sha256()
    for path in compiled_modules(package):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def base_folder(environ: dict[str, str], package: Path = PACKAGE) -> Path:
    """The folder the versioned folders go in (see the module's docstring)."""
    for name in (BASE_VARIABLE, "NUMBA_CACHE_DIR"):
        if environ.get(name):
            return Path(environ[name])
    beside = package / "__pycache__"
    if os.access(beside if beside.exists() else package, os.W_OK):
        return beside / "kernels"
    home = Path(environ.get("HOME", "/nonexistent"))
    if os.access(home, os.W_OK):
        return home / ".cache" / "hpcsched" / "kernels"
    return Path(tempfile.gettempdir()) / f"hpcsched-kernels-{os.getuid()}"


def use_versioned_folder(environ: dict[str, str] | None = None, package: Path = PACKAGE) -> Path:
    """Point numba's cache at this version's folder, in `environ` (the process's by default) and,
    when numba is already imported, in its live configuration. Returns the folder."""
    environ = os.environ if environ is None else environ
    base = base_folder(environ, package)
    folder = base / fingerprint(package)
    environ[BASE_VARIABLE] = str(base)
    environ["NUMBA_CACHE_DIR"] = str(folder)
    if "numba" in sys.modules:
        sys.modules["numba"].config.CACHE_DIR = str(folder)
    return folder
