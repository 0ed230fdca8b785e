"""migrator.bulk: the collector paused for bulk builds, and running again inside a pause for a wait."""

from __future__ import annotations

import gc

from migrator.bulk import with_gc, without_gc


def test_a_wait_inside_a_pause_collects_and_the_pause_goes_on() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with without_gc():
            assert not gc.isenabled()
            with with_gc():
                assert gc.isenabled()
                cycle: list[object] = []
                cycle.append(cycle)  # garbage only the collector frees
                del cycle
                assert gc.collect() >= 1
            assert not gc.isenabled()
            with without_gc():  # nested: resumes once, at the outermost exit
                pass
            assert not gc.isenabled()
        assert gc.isenabled()
        with with_gc():  # outside any pause: nothing to resume, nothing paused after
            assert gc.isenabled()
        assert gc.isenabled()
        gc.disable()  # a collector the caller disabled stays disabled
        with without_gc(), with_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
