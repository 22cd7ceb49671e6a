"""The replay buffer: a window that grows with the data, pacing by samples per new position, overwrite
order, checkpoint round trip (including buffers saved before pacing)."""

import numpy as np
import torch
from selfplay.replay import ReplayBuffer


def fill(buf, n, start=0):
    idx = np.arange(start, start + n)
    buf.add(np.stack([idx, idx], 1).astype(np.uint64), np.full((n, 7), 1 / 7, np.float32),
            np.ones(n, np.float32), np.zeros(n, np.float32), idx)


def test_a_learner_that_outpaces_self_play_samples_the_whole_window_not_the_newest_slots():
    # self-play trickles in 10 positions at a time and the learner takes everything it is allowed
    buf = ReplayBuffer(capacity=5000, state_words=2, num_actions=7, samples_per_position=8,
                       window_floor=4000, window_scale=1.0, window_exponent=1.0, seed=0)
    fill(buf, 3000)
    seen = []
    for start in range(3000, 3500, 10):
        fill(buf, 10, start)
        while (batch := buf.sample(100)) is not None:
            seen.append(batch["version"])
    seen = np.concatenate(seen)
    assert len(seen) >= 8 * 3490  # it kept up with its allowance
    counts = np.bincount(seen, minlength=3500)
    assert counts[:1000].sum() > 0.2 * len(seen)  # the oldest positions are sampled as often as the newest
    assert (counts[:3000] > 0).mean() > 0.99  # and nearly every position was seen


def test_the_window_grows_sublinearly_with_positions_added_above_its_floor():
    buf = ReplayBuffer(capacity=100_000, state_words=2, num_actions=7, window_floor=500, window_scale=4.0,
                       window_exponent=0.75)
    fill(buf, 300)
    assert buf.window() == 300  # below the floor: everything held
    fill(buf, 9700, start=300)
    assert buf.window() == 4000  # 4 * 10_000 ** 0.75
    fill(buf, 90_000, start=10_000)
    assert buf.window() == int(4 * 100_000 ** 0.75)  # ~22.5k: 10x the data, 5.6x the window
    versions = buf.sample(256)["version"]
    assert versions.min() >= 100_000 - buf.window()  # never older than the window


def test_pacing_stops_sampling_at_the_samples_per_position_target_until_fresh_games_arrive():
    buf = ReplayBuffer(capacity=1000, state_words=2, num_actions=7, samples_per_position=2.0, window_floor=100)
    fill(buf, 100)
    batches = 0
    while (batch := buf.sample(10)) is not None:
        assert len(set(batch["version"].tolist())) == 10  # no duplicates inside a batch
        batches += 1
    assert batches == 20 and buf.trained == 200 and buf.samples_per_added() == 2.0
    assert not buf.ready(10) and buf.allowance() == 0
    fill(buf, 5, start=100)  # 10 more samples earned
    assert buf.sample(10) is not None and buf.sample(10) is None


def test_ring_overwrites_the_oldest_first():
    buf = ReplayBuffer(capacity=50, state_words=2, num_actions=7)
    fill(buf, 40)
    fill(buf, 30, start=40)
    assert buf.size == 50 and buf.added == 70
    assert sorted(buf.version.tolist()) == list(range(20, 70))


def test_state_dict_round_trip_keeps_contents_order_and_pacing_counters():
    buf = ReplayBuffer(capacity=64, state_words=2, num_actions=7, samples_per_position=1.0, window_floor=32,
                       window_scale=1.0, window_exponent=0.5, seed=1)
    fill(buf, 80)
    buf.sample(16)
    again = ReplayBuffer(capacity=64, state_words=2, num_actions=7, samples_per_position=1.0, window_floor=32,
                         window_scale=1.0, window_exponent=0.5)
    again.load_state_dict(buf.state_dict())
    assert (again.size, again.added, again.trained) == (64, 80, 16)
    assert again.window() == buf.window() and again.allowance() == buf.allowance() == 64
    assert newest_first(again) == newest_first(buf) == list(range(79, 15, -1))


def newest_first(b):
    return [int(b.version[(b.cursor - 1 - k) % b.capacity]) for k in range(b.size)]


def test_a_buffer_saved_with_per_slot_use_counts_resumes_on_the_pacing_target():
    old = {"states": torch.zeros(30, 2, dtype=torch.int64), "policy": torch.full((30, 7), 1 / 7),
           "z": torch.ones(30), "q": torch.zeros(30), "version": torch.arange(30),
           "uses": torch.full((30,), 4, dtype=torch.int32), "added": 30}
    buf = ReplayBuffer(capacity=100, state_words=2, num_actions=7, samples_per_position=4.0, window_floor=10)
    buf.load_state_dict(old)
    assert buf.size == 30 and buf.added == 30 and buf.trained == 120
    assert buf.sample(10) is None  # on target: it waits for fresh positions
    fill(buf, 5, start=30)
    assert buf.sample(10) is not None
