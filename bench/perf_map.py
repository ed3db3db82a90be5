"""Write /tmp/perf-<pid>.map for the compiled loops of the decision core, so that `perf report`
names numba's functions instead of bare addresses.

Use: import this module in the process perf records and call `write()` once the loops are compiled
(after a first decision). Each compiled overload's functions are listed with their addresses; a
function's size is taken as the distance to the next listed address (capped), which is enough for
perf to attribute samples.
"""

from __future__ import annotations

import os

from numba.core.registry import CPUDispatcher

CAP = 1 << 16  # the most a function is taken to span


def _plain(name: str) -> str:
    """numba's mangled name as dotted parts (`app.sched.profile_kernels.earliest`), a wrapper's
    prefix kept (cpython., cfunc.)."""
    prefix, _, rest = name.rpartition("_ZN")
    parts, i = [], 0
    while i < len(rest) and rest[i].isdigit():
        j = i
        while rest[j].isdigit():
            j += 1
        size = int(rest[i:j])
        parts.append(rest[j : j + size])
        i = j + size
    return prefix + ".".join(parts) if parts else name


def _symbols(modules: list) -> dict[int, str]:
    """Every function numba's engine holds (loops loaded from its cache keep only their object code,
    so the engine's list of defined symbols is read, not each library's module)."""
    engines = {id(cres.library._codegen._engine): cres.library._codegen._engine
               for module in modules for value in vars(module).values() if isinstance(value, CPUDispatcher)
               for cres in value.overloads.values()}
    found: dict[int, str] = {}
    for engine in engines.values():
        for name in engine._defined_symbols:
            address = engine._ee.get_function_address(name)
            if address:
                found[address] = _plain(name)
    return found


def write(modules: list, path: str | None = None) -> str:
    """The map for `modules`' dispatchers; its path."""
    found = _symbols(modules)
    path = path or f"/tmp/perf-{os.getpid()}.map"
    starts = sorted(found)
    with open(path, "w") as out:
        for i, address in enumerate(starts):
            size = min(CAP, starts[i + 1] - address) if i + 1 < len(starts) else CAP
            out.write(f"{address:x} {size:x} {found[address]}\n")
    return path
