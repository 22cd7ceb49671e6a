"""The replay ring buffer: reuse cap, overwrite order, checkpoint round trip."""

import numpy as np
from selfplay.replay import ReplayBuffer


def fill(buf, n, start=0):
    idx = np.arange(start, start + n)
    buf.add(np.stack([idx, idx], 1).astype(np.uint64), np.full((n, 7), 1 / 7, np.float32),
            np.ones(n, np.float32), np.zeros(n, np.float32), idx)


def test_each_position_is_used_at_most_max_reuse_times_then_the_learner_waits():
    buf = ReplayBuffer(capacity=100, state_words=2, num_actions=7, max_reuse=3, seed=0)
    fill(buf, 40)
    seen = []
    while (batch := buf.sample(10)) is not None:
        assert len(set(batch["version"].tolist())) == 10  # no duplicates inside a batch
        seen += batch["version"].tolist()
    counts = np.bincount(seen, minlength=40)
    assert counts.max() <= 3 and counts.sum() == len(seen)
    assert buf.eligible() < 10
    fill(buf, 10, start=40)  # fresh games make it eligible again
    assert buf.sample(10) is not None


def test_ring_overwrites_the_oldest_first():
    buf = ReplayBuffer(capacity=50, state_words=2, num_actions=7, max_reuse=4)
    fill(buf, 40)
    fill(buf, 30, start=40)
    assert buf.size == 50 and buf.added == 70
    assert sorted(buf.version.tolist()) == list(range(20, 70))


def test_state_dict_round_trip_keeps_contents_and_use_counts():
    buf = ReplayBuffer(capacity=64, state_words=2, num_actions=7, max_reuse=4, seed=1)
    fill(buf, 80)
    buf.sample(16)
    again = ReplayBuffer(capacity=64, state_words=2, num_actions=7, max_reuse=4)
    again.load_state_dict(buf.state_dict())
    assert again.size == 64 and again.added == 80
    a = sorted(zip(buf.version.tolist(), buf.uses.tolist()))
    b = sorted(zip(again.version.tolist(), again.uses.tolist()))
    assert a == b
