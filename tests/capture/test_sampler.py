"""The host CPU sampler (``xlaprof.capture.sampler``): it leaves the job's random sequence alone
and hands over finished steps only."""

from __future__ import annotations

from xlaprof.capture.sampler import HostSampler


def test_the_sampler_leaves_the_jobs_random_sequence_alone() -> None:
    import random
    import time

    random.seed(1234)
    expected = [random.random() for _ in range(3)]
    random.seed(1234)
    sampler = HostSampler(1000.0)
    sampler.start()
    time.sleep(0.05)  # ~50 jittered waits
    sampler.stop()
    sampler.thread.join(timeout=5)
    assert [random.random() for _ in range(3)] == expected


def test_the_sampler_keeps_the_step_in_progress() -> None:
    sampler = HostSampler(100.0)
    sampler.seconds.update({(0, "a.py:1"): 0.01, (1, "a.py:1"): 0.02, (1, "<library>"): 0.0})
    taken = sampler.take(keep=1)
    assert taken == {0: {"a.py:1": 0.01}}
    assert sampler.take() == {1: {"a.py:1": 0.02}}  # zero-second entries are dropped
    assert sampler.take() == {}
