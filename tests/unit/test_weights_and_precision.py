"""Versioned weights through shared memory, and the precision policy for every device class."""

import os

import pytest
import torch
from selfplay.errors import ConfigError
from selfplay.games import ConnectFour
from selfplay.hardware import cores_per_rank, default_actor_count, physical_cores, precision_for
from selfplay.model import build_model, fold_batchnorm
from selfplay.weights import SharedWeights, flat_float_state


def test_published_weights_reach_a_reader_with_their_version():
    game = ConnectFour()
    src, dst = build_model(game, 8, 1), build_model(game, 8, 1)
    numel = sum(v.numel() for _, v in flat_float_state(src))
    writer = SharedWeights(numel)
    reader = SharedWeights(numel, name=writer.name)
    try:
        assert reader.read_into(dst, -1) == -1          # nothing published yet
        writer.publish(src, 7)
        assert reader.read_into(dst, -1) == 7
        assert reader.read_into(dst, 7) == 7            # no newer version: unchanged
        for (k, a), (_, b) in zip(flat_float_state(src), flat_float_state(dst)):
            assert torch.equal(a, b), k
    finally:
        reader.close()
        writer.close()


def test_folded_inference_net_matches_the_training_net():
    game = ConnectFour()
    model = build_model(game, 16, 2)
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.from_numpy(game.encode(game.states_from_moves([[3, 3, 2], [0]])))
    with torch.no_grad():
        p1, v1 = model(x)
        p2, v2 = fold_batchnorm(model)(x)
    torch.testing.assert_close(p1, p2, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(v1, v2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device,requested,capability,amx,dtype,scaler", [
    ("cuda", "auto", (7, 5), False, torch.float16, True),     # T4: fp16 + GradScaler, never emulated bf16
    ("cuda", "auto", (8, 0), False, torch.bfloat16, False),   # A100
    ("cuda", "fp32", (9, 0), False, None, False),
    ("cpu", "auto", None, True, torch.bfloat16, False),       # AMX or AVX512-BF16
    ("cpu", "auto", None, False, None, False),
    ("xla", "auto", None, False, torch.bfloat16, False),      # TPU: bf16 whatever the host CPU has
    ("xla", "bf16", None, False, torch.bfloat16, False),
    ("xla", "fp32", None, True, None, False),
])
def test_precision_policy(device, requested, capability, amx, dtype, scaler):
    p = precision_for(torch.device(device), requested, capability, amx)
    assert p.dtype == dtype and p.use_grad_scaler == scaler


@pytest.mark.parametrize("device", ["cpu", "xla"])
def test_fp16_off_cuda_is_a_config_error(device):
    with pytest.raises(ConfigError, match="fp16 needs CUDA"):
        precision_for(torch.device(device), "fp16", None, False)


@pytest.mark.parametrize("cores,actors", [(1, 1), (2, 2), (3, 2), (4, 3), (16, 15)])
def test_default_actor_count_leaves_the_learner_a_core_from_three_cores_up(cores, actors):
    assert default_actor_count(cores) == actors


def test_ranks_on_one_node_split_its_cores(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert cores_per_rank() == max(1, physical_cores() // 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    assert cores_per_rank() == max(1, physical_cores() // 64)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert cores_per_rank() == physical_cores()


def test_far_more_actors_than_cpus_are_clamped_with_a_warning(monkeypatch):
    from selfplay.hardware import actor_count

    cpus = len(os.sched_getaffinity(0))
    assert actor_count(0, 4) == (default_actor_count(4), "")  # 0: the default
    assert actor_count(1, 4) == (1, "")
    count, warning = actor_count(cpus * 50, 1)
    assert count == cpus and f"actors.count={cpus * 50} is more than the {cpus} CPU(s)" in warning
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cpus * 2))  # more ranks than CPUs: still one actor each
    assert actor_count(8, 1)[0] == 1
