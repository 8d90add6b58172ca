import gc
import threading

import pytest

from lakeui.memory import gc_paused


def test_the_collector_is_paused_during_a_step_and_resumes_after_the_last():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer step still runs
    assert gc.isenabled()


def test_a_decorated_step_resumes_the_collector_when_it_raises():
    @gc_paused()
    def step():
        assert not gc.isenabled()
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        step()
    assert gc.isenabled()


def test_steps_in_two_threads_resume_it_only_when_both_ended():
    first_in, second_done = threading.Event(), threading.Event()
    seen = []

    def first():
        with gc_paused():
            first_in.set()
            second_done.wait(5)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with gc_paused():
        pass
    second_done.set()
    thread.join(5)
    assert seen == [False]  # the second step's end did not resume it under the first
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
