"""What runs the network for search: the ONNX Runtime graph computes what the folded torch net does."""

import logging

import numpy as np
import pytest
import torch
from selfplay.config_io import load
from selfplay.errors import ConfigError
from selfplay.games import make_game
from selfplay.hardware import inference_dtype, leaves_served_by_learner
from selfplay.inference import NetworkEvaluator, actor_dtype, actor_numbers, pick_runtime, runs_int8
from selfplay.model import build_model


def _positions(game, n, seed=0):
    rng = np.random.default_rng(seed)
    states = game.initial_states(n)
    for _ in range(5):
        legal = game.legal_mask(states)
        states = game.play(states, np.where(legal, rng.random(legal.shape), -1).argmax(axis=1)).states
    return game.encode(states)


def _trained_a_little(model, game):
    """Weights and BatchNorm statistics away from their initial values, so folding has something to fold."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.from_numpy(_positions(game, 64, seed=1))
    model.train()
    for _ in range(3):
        logits, value = model(x)
        (logits.logsumexp(dim=1).mean() + value.square().mean()).backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


@pytest.mark.parametrize(("name", "heads"), [("connect4", {}), ("tictactoe", {}),
                                              ("connect4", {"policy_filters": 2, "value_filters": 1})])
def test_onnxruntime_computes_what_the_folded_torch_net_computes(name, heads):
    game = make_game(name)
    model = _trained_a_little(build_model(game, 8, 2, **heads), game)
    onnx = NetworkEvaluator(model, None, "onnxruntime")
    eager = NetworkEvaluator(model, None, "torch")
    assert (onnx.runtime, eager.runtime) == ("onnxruntime", "torch")
    for n in (1, 37):
        planes = _positions(game, n)
        (logits, values), (want_logits, want_values) = onnx(planes), eager(planes)
        assert logits.shape == (n, game.num_actions) and values.shape == (n,)
        np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)
    assert onnx.calls == 2 and onnx.positions == 38


def test_a_refresh_hands_the_new_weights_to_onnxruntime():
    game = make_game("connect4")
    model = build_model(game, 8, 1).eval()
    evaluator = NetworkEvaluator(model, None, "onnxruntime")
    planes = _positions(game, 8)
    before = evaluator(planes)[0]
    _trained_a_little(model, game)
    evaluator.refresh(model)
    after = evaluator(planes)[0]
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, NetworkEvaluator(model, None, "torch")(planes)[0], rtol=1e-4, atol=1e-5)


def test_auto_runs_fp32_on_onnxruntime_and_bf16_on_torch_and_a_contradiction_is_one_line():
    assert pick_runtime("auto", None) == "onnxruntime"
    assert pick_runtime("auto", torch.bfloat16) == "torch"
    assert pick_runtime("torch", None) == "torch"
    with pytest.raises(ConfigError, match=r"^actors\.runtime=onnxruntime runs fp32 only: add "
                                          r"--actors\.precision=fp32, or use auto$"):
        pick_runtime("onnxruntime", torch.bfloat16)
    assert load(None, ["--actors.runtime=torch"]).actors.runtime == "torch"
    with pytest.raises(ConfigError, match=r"actors\.runtime"):
        load(None, ["--actors.runtime=tensorrt"])


def test_int8_runs_fp32_until_it_has_seen_positions_then_a_refresh_quantizes_on_them(caplog):
    game = make_game("connect4")
    torch.manual_seed(0)  # an unseeded net failed the argmax check below in 1 of 30 inits (0.875), once in CI
    model = _trained_a_little(build_model(game, 16, 2), game)
    evaluator = NetworkEvaluator(model, None, "auto", int8=True)
    eager = NetworkEvaluator(model, None, "torch")
    planes = _positions(game, 64, seed=3)
    logits, values = evaluator(planes)
    np.testing.assert_allclose(logits, eager(planes)[0], rtol=1e-4, atol=1e-5)  # no ranges yet: fp32
    assert evaluator.calibration is planes
    with caplog.at_level(logging.INFO):
        evaluator.refresh(model)  # as an actor does when the learner's weights arrive
    assert "pre-processing" not in caplog.text  # the quantizer's advice, at every refresh, stays off the output
    q_logits, q_values = evaluator(planes)
    want_logits, want_values = eager(planes)
    assert not np.allclose(q_logits, want_logits, rtol=1e-4, atol=1e-5)  # it runs another graph now...
    assert np.abs(q_values - want_values).max() < 0.1  # ...close to fp32 on the positions its ranges came from
    assert (q_logits.argmax(axis=1) == want_logits.argmax(axis=1)).mean() > 0.9


@pytest.mark.parametrize(("flags", "precision", "runtime", "int8"), [
    ({"avx2", "avx512f", "avx512_vnni"}, "auto", "auto", True),       # the Xeon it was measured on
    ({"avx2", "avx_vnni"}, "auto", "auto", True),
    ({"avx2", "avx512_vnni", "avx512_bf16"}, "auto", "auto", True),   # the EPYC: 2.1x torch's bf16
    ({"avx2", "avx512_vnni", "avx512_bf16", "amx_bf16"}, "auto", "auto", False),  # AMX: int8's training unmeasured
    ({"avx2", "avx512_vnni", "avx512_bf16"}, "bf16", "auto", False),  # asked for bf16: torch's
    ({"fma", "avx2"}, "auto", "auto", False),                        # no VNNI: can saturate, one seed of two
    ({"avx2", "avx512_vnni"}, "auto", "torch", False),                # asked for torch: fp32 on torch
    ({"avx2", "avx512_vnni"}, "fp32", "auto", False),
    ({"fma", "avx2"}, "int8", "auto", True),                          # asked for: anywhere
])
def test_auto_runs_int8_actors_where_the_cpu_has_vnni_and_no_amx(monkeypatch, flags, precision, runtime, int8):
    monkeypatch.setattr("selfplay.hardware._cpu_flags", lambda: flags)
    assert runs_int8(precision, runtime) is int8
    assert (actor_numbers(precision, runtime) == "int8") is int8
    if not int8:
        assert actor_dtype(precision, runtime) is inference_dtype(precision)
        return
    # ONNX Runtime's graph, no autocast: a bf16 CPU's actor builds its evaluator without a refusal
    assert actor_dtype(precision, runtime) is None
    assert pick_runtime(runtime, actor_dtype(precision, runtime), int8=True) == "onnxruntime"
    # auto serves a GPU's leaves to fp32 actors only: an int8 actor's own graph runs 2.2x fp32's
    assert not leaves_served_by_learner("auto", torch.device("cuda"), actor_numbers(precision, runtime))


def test_int8_is_onnxruntimes_and_grading_reads_it_as_fp32():
    assert pick_runtime("auto", None, int8=True) == "onnxruntime"
    with pytest.raises(ConfigError, match=r"^actors\.precision=int8 runs in ONNX Runtime: drop actors\.runtime=torch, "
                                          r"or use actors\.precision=fp32$"):
        pick_runtime("torch", None, int8=True)
    assert inference_dtype("int8") is None  # evaluation and the arena, which read actors.precision, run fp32
    assert not leaves_served_by_learner("auto", torch.device("cuda"), "int8")  # int8 is the actors' own graph
    assert load(None, ["--actors.precision=int8"]).actors.precision == "int8"
