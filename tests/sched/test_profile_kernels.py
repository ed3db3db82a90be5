"""Where the profile's compiled loops are cached: never a refusal to compile at import."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import numba
from numba.core.registry import CPUDispatcher as Dispatcher

from app.sched import profile_kernels


def test_the_cache_falls_back_to_the_temporary_directory_where_nothing_else_is_writable() -> None:
    """A system-wide install run by a user without a home (the Docker image without its
    NUMBA_CACHE_DIR): numba could write neither beside the code nor in the home, so the loops are
    cached in a folder of the temporary directory; a cache folder set by the administrator, or a
    writable place, is left as it is."""
    with mock.patch.object(numba.config, "CACHE_DIR", ""), \
            mock.patch.object(profile_kernels.os, "access", return_value=False):
        profile_kernels._cache_where_writable()
        chosen = Path(numba.config.CACHE_DIR)
    assert chosen.parent == Path(tempfile.gettempdir()) and chosen.name.startswith("hpcsched-numba-")
    with mock.patch.object(numba.config, "CACHE_DIR", "/srv/numba-cache"), \
            mock.patch.object(profile_kernels.os, "access", return_value=False):
        profile_kernels._cache_where_writable()
        assert numba.config.CACHE_DIR == "/srv/numba-cache"
    with mock.patch.object(numba.config, "CACHE_DIR", ""), \
            mock.patch.object(profile_kernels.os, "access", return_value=True):
        profile_kernels._cache_where_writable()
        assert numba.config.CACHE_DIR == ""


def test_after_warming_a_replay_of_every_policy_compiles_nothing_more() -> None:
    """`warm` (what the service runs before its first request) covers every argument type the
    profile passes: a decision of any policy finds its loops compiled already."""
    from tests.sim.replay_reference import POLICIES, run, sdsc

    loops = [f for f in vars(profile_kernels).values() if isinstance(f, Dispatcher)]  # every compiled loop
    assert {"earliest_slot", "note_first", "fold", "step_matrix"} <= {f.__name__ for f in loops}
    profile_kernels.warm()
    warmed = [len(loop.signatures) for loop in loops]
    w = sdsc()
    for label in POLICIES:
        run(w, label)
    assert [len(loop.signatures) for loop in loops] == warmed
