"""Leaves answered by the learner's device: local inference's numbers, one batch for all actors, deaths survived."""

import multiprocessing as mp
import threading
import time

import numpy as np
import pytest
import torch
from selfplay.games import make_game
from selfplay.inference import NetworkEvaluator
from selfplay.leaf_server import LeafServer, LeafSlots, RemoteEvaluator, bucket_size
from selfplay.model import build_model


@pytest.fixture
def served():
    """A connect4 net served on the CPU in fp32 to two actors, each a thread with its own pipe."""
    torch.manual_seed(0)
    game = make_game("connect4")
    model = build_model(game, 8, 1).eval()
    planes = game.encode(game.initial_states(1)).shape[1:]
    slots = LeafSlots(2, 16, planes, game.num_actions)
    server = LeafServer(slots, torch.device("cpu"), None)
    server.publish(model, 7)
    actors = []
    for i in range(2):
        ours, theirs = mp.Pipe()
        server.attach(i, ours)
        actors.append(RemoteEvaluator(LeafSlots(**slots.spec()), i, theirs))
    yield game, model, server, actors
    for a in actors:
        a.slots.close()
    slots.close()


def random_leaves(game, n, seed):
    rng = np.random.default_rng(seed)
    states = game.initial_states(n)
    for _ in range(6):
        legal = game.legal_mask(states)
        actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
        states = game.play(states, actions).states
    return game.encode(states)


def test_answers_match_local_inference_and_carry_the_served_version(served):
    game, model, server, (actor, _) = served
    leaves = random_leaves(game, 16, seed=1)
    result = {}
    t = threading.Thread(target=lambda: result.update(out=actor(leaves)))
    t.start()
    while t.is_alive():
        server.serve_once(timeout=0.05)
    logits, values = result["out"]
    want_logits, want_values = NetworkEvaluator(model, None)(leaves)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)
    assert actor.version == 7 and actor.positions == 16 and actor.calls == 1


def test_requests_from_several_actors_become_one_forward_pass(served):
    game, model, server, actors = served
    leaves = [random_leaves(game, n, seed=n) for n in (5, 11)]
    results = [None, None]
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, actors[i](leaves[i]))) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while not all(p.poll() for p in server.pipes):  # both requests are waiting before the server looks
        assert time.monotonic() < deadline, "the actors never sent their leaves"
        time.sleep(0.005)
    assert server.serve_once(timeout=1.0) == 16
    for t in threads:
        t.join(timeout=5)
    assert server.batches == 1
    for (logits, values), x in zip(results, leaves):
        want_logits, want_values = NetworkEvaluator(model, None)(x)
        np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)


def test_a_dead_actor_is_dropped_and_the_others_are_still_served(served):
    game, _, server, (dead, alive) = served
    dead.pipe.close()
    assert server.serve_once(timeout=0.2) == 0
    assert server.pipes[0] is None
    leaves = random_leaves(game, 3, seed=3)
    t = threading.Thread(target=alive, args=(leaves,))
    t.start()
    while t.is_alive():
        server.serve_once(timeout=0.05)
    assert alive.calls == 1 and server.positions == 3


def test_a_newer_publish_is_served_with_its_version(served):
    game, model, server, (actor, _) = served
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    server.publish(model, 8)
    leaves = random_leaves(game, 4, seed=4)
    server.start()
    try:
        logits, _ = actor(leaves)
    finally:
        server.stop()
    assert actor.version == 8
    np.testing.assert_allclose(logits, NetworkEvaluator(model, None)(leaves)[0], rtol=1e-4, atol=1e-5)


def test_more_leaves_than_the_slot_holds_is_refused(served):
    game, _, _, (actor, _) = served
    with pytest.raises(ValueError, match="exceed the slot's capacity of 16"):
        actor(random_leaves(game, 17, seed=5))


def test_xla_batches_are_padded_to_few_sizes():
    """XLA compiles one program per input shape: 1..640 leaves (5 actors x 128 games) map onto 8 sizes."""
    sizes = {n: bucket_size(n, 640) for n in range(1, 641)}
    assert all(n <= size <= max(8, 2 * n) for n, size in sizes.items())
    assert sorted(set(sizes.values())) == [8, 16, 32, 64, 128, 256, 512, 640]


def test_auto_serves_leaves_from_an_accelerator_only_to_fp32_actors():
    from selfplay.hardware import leaves_served_by_learner
    cuda, xla, cpu = torch.device("cuda", 0), torch.device("xla", 0), torch.device("cpu")
    assert leaves_served_by_learner("auto", cuda, "fp32") and leaves_served_by_learner("auto", xla, "fp32")
    assert not leaves_served_by_learner("auto", cuda, "bf16")  # bf16 actors outran an H200's served leaves
    assert not leaves_served_by_learner("auto", cpu, "fp32")  # the learner's one core would do every forward pass
    assert leaves_served_by_learner("learner", cpu, "bf16") and not leaves_served_by_learner("local", cuda, "fp32")
