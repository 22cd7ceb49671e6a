"""The folded network as an ONNX graph, run by ONNX Runtime: the fp32 forward pass on CPUs without bf16.

On a 2-core AVX2-only AMD EPYC, one thread, batch 128, the folded 32x4 net took 9.1 ms a call in ONNX
Runtime against 15.0 ms in eager torch (1.65x; docs/ARCHITECTURE.md, `make bench`'s runtime rows).

The graph is written here from the module's own layers rather than traced by ``torch.onnx.export``:
tracing takes ~300 ms, too long to repeat at every weight refresh, and its initializer names are the
exporter's to choose. Here the names are fixed, so a refresh only hands the new weights to a new
session (~10 ms), and the graph is exactly the one ``PolicyValueNet.forward`` computes after
``fold_batchnorm``: conv (bias folded in) + ReLU, residual adds, 1x1-conv heads, linear layers, tanh.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .model import PolicyValueNet


def available() -> bool:
    """onnxruntime and onnx import here (both are dependencies; a platform without wheels falls back to torch)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class _Graph:
    """Nodes and initializers of an ONNX graph, added layer by layer."""

    def __init__(self):
        self.nodes, self.weights = [], {}

    def add(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        from onnx import helper
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def weight(self, name: str, tensor: torch.Tensor) -> str:
        self.weights[name] = tensor.detach().float().cpu().numpy()
        return name

    def conv(self, x: str, conv: nn.Conv2d, name: str) -> str:
        k = conv.kernel_size[0]
        inputs = [x, self.weight(f"{name}.weight", conv.weight)]
        if conv.bias is not None:  # fold_batchnorm gives every conv a bias
            inputs.append(self.weight(f"{name}.bias", conv.bias))
        return self.add("Conv", inputs, name, kernel_shape=[k, k], pads=[k // 2] * 4)

    def linear(self, x: str, linear: nn.Linear, name: str) -> str:
        return self.add("Gemm", [x, self.weight(f"{name}.weight", linear.weight),
                                 self.weight(f"{name}.bias", linear.bias)], name, transB=1)


def to_onnx(folded: PolicyValueNet) -> bytes:
    """The serialized ONNX model of a ``fold_batchnorm`` copy: input x [N, planes, H, W] -> (logits [N, A], value [N])."""
    from onnx import TensorProto, helper, numpy_helper

    g = _Graph()
    h = g.add("Relu", [g.conv("x", folded.stem[0], "stem")], "stem.relu")
    for i, block in enumerate(folded.trunk):
        y = g.add("Relu", [g.conv(h, block.conv1, f"trunk.{i}.conv1")], f"trunk.{i}.relu1")
        y = g.conv(y, block.conv2, f"trunk.{i}.conv2")
        h = g.add("Relu", [g.add("Add", [h, y], f"trunk.{i}.add")], f"trunk.{i}.relu2")
    p = g.add("Relu", [g.conv(h, folded.policy_head[0], "policy.conv")], "policy.relu")
    p = g.add("Flatten", [p], "policy.flat", axis=1)  # NCHW order, as nn.Flatten
    g.linear(p, folded.policy_head[4], "logits")
    v = g.add("Relu", [g.conv(h, folded.value_head[0], "value.conv")], "value.relu")
    v = g.add("Relu", [g.linear(g.add("Flatten", [v], "value.flat", axis=1), folded.value_head[4], "value.hidden")],
              "value.hidden.relu")
    v = g.add("Tanh", [g.linear(v, folded.value_head[6], "value.out")], "value.tanh")
    g.add("Flatten", [v], "value", axis=0)  # [N, 1] -> [1, N]; reshaped to [N] by the caller

    graph = helper.make_graph(
        g.nodes, "policy_value_net",  # the board's height and width are fixed by the heads' linear layers
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", folded.stem[0].in_channels, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", folded.actions]),
         helper.make_tensor_value_info("value", TensorProto.FLOAT, [1, "n"])],
        [numpy_helper.from_array(w, name) for name, w in g.weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime since 1.10
    return model.SerializeToString()


class _QuietPreprocessingAdvice(logging.Filter):
    """Drops onnxruntime.quantization's advice to pre-process the model (shape inference, meant for large graphs),
    which it logs at every call: an actor quantizes at each weight refresh."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing" not in record.getMessage()


def quantize_int8(model: bytes, calibration: np.ndarray) -> bytes:
    """The graph with int8 weights (per output channel) and uint8 activations: ONNX Runtime's static quantization
    in its QDQ form, the activations' ranges measured on ``calibration`` (planes the net evaluates).

    Unsigned activations and signed weights are what its docstring advises for x86 CPUs with VNNI (and, with
    7-bit weights, without). On a 2-core Xeon with AVX512-VNNI, batch 128, one thread, the 32x4 net ran 2.2x as
    many evaluations a second as in fp32, quantizing in 0.15-0.3 s (docs/ARCHITECTURE.md, "int8 actors")."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Planes(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": np.ascontiguousarray(calibration, dtype=np.float32)}])

        def get_next(self):
            return next(self.batches, None)

    quiet = _QuietPreprocessingAdvice()
    logging.getLogger().addFilter(quiet)
    try:
        with tempfile.TemporaryDirectory(prefix="gantry-int8-") as tmp:  # paths: every release since 1.17 reads them
            fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
            fp32.write_bytes(model)
            quantize_static(str(fp32), str(int8), Planes(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
            return int8.read_bytes()
    finally:
        logging.getLogger().removeFilter(quiet)


class OnnxForward:
    """A session over the folded net's graph: ``planes float32 [N, C, H, W] -> (logits [N, A], values [N])``.

    With ``calibration`` planes, the graph runs quantized to int8 (quantize_int8), its ranges measured on them."""

    def __init__(self, folded: PolicyValueNet, threads: int, calibration: np.ndarray | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # the process's torch threads: 1 in an actor
        options.inter_op_num_threads = 1
        # no busy-waiting between ops: with more than one thread it burns cores the actors and the learner need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: no per-session chatter on the progress output
        graph = to_onnx(folded) if calibration is None else quantize_int8(to_onnx(folded), calibration)
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = self.session.run(None, {"x": np.ascontiguousarray(planes, dtype=np.float32)})
        return logits, value.reshape(-1)
