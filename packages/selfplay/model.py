"""A small ResNet with a policy head and a value head (AlphaZero's shape, scaled down)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

STEM_WEIGHT = "stem.0.weight"  # the first convolution's weight [channels, input planes, 3, 3]


def widen_input_planes(weight: torch.Tensor, planes: int) -> torch.Tensor:
    """A first-convolution weight (or its optimizer state) for ``planes`` input planes, zero for the added ones.

    Connect Four checkpoints written before its threat planes read two planes; zero weights on the planes added
    after them make the widened network compute exactly what the saved one did, and training goes on from there."""
    missing = planes - weight.shape[1]
    if missing <= 0:
        return weight
    return torch.cat([weight, weight.new_zeros(weight.shape[0], missing, *weight.shape[2:])], dim=1)


class ResBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class PolicyValueNet(nn.Module):
    """Input [N, planes, H, W] -> (policy logits [N, actions], value in [-1, 1] [N])."""

    def __init__(self, planes: int, height: int, width: int, actions: int, channels: int, blocks: int,
                 policy_filters: int = 32, value_filters: int = 32, value_hidden: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(planes, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels), nn.ReLU())
        self.trunk = nn.Sequential(*(ResBlock(channels) for _ in range(blocks)))
        self.cells, self.actions, self.channels, self.value_hidden = height * width, actions, channels, value_hidden
        self.policy_head = self._policy_head(policy_filters)
        self.value_head = self._value_head(value_filters)

    def _policy_head(self, filters: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(self.channels, filters, 1, bias=False), nn.BatchNorm2d(filters), nn.ReLU(),
                             nn.Flatten(), nn.Linear(filters * self.cells, self.actions))

    def _value_head(self, filters: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(self.channels, filters, 1, bias=False), nn.BatchNorm2d(filters), nn.ReLU(),
                             nn.Flatten(), nn.Linear(filters * self.cells, self.value_hidden), nn.ReLU(),
                             nn.Linear(self.value_hidden, 1), nn.Tanh())

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load weights, first rebuilding a head whose filter count differs from the saved one.

        Grading code builds the net from channels and blocks alone; this lets it read checkpoints
        of any head width (those written before the heads were widened had 2 and 1 filters). The
        trainer checks the head widths against its config before it gets here (Config.SHAPE_FIELDS).
        """
        device = next(self.parameters()).device
        for name, build in (("policy_head", self._policy_head), ("value_head", self._value_head)):
            saved = state_dict.get(f"{name}.0.weight")
            if saved is not None and saved.shape[0] != getattr(self, name)[0].out_channels:
                setattr(self, name, build(saved.shape[0]).to(device).train(self.training))  # a new module trains
        stem = state_dict.get(STEM_WEIGHT)
        if stem is not None:  # written before the threat planes: the same function, see widen_input_planes
            state_dict = {**state_dict, STEM_WEIGHT: widen_input_planes(stem, self.stem[0].in_channels)}
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.stem(x))
        return self.policy_head(h), self.value_head(h).squeeze(-1)


def build_model(game, channels: int, blocks: int, policy_filters: int = 32,
                value_filters: int = 32) -> PolicyValueNet:
    h, w = game.board_shape
    return PolicyValueNet(game.num_planes, h, w, game.num_actions, channels, blocks, policy_filters, value_filters)


def value_units_firing(model: PolicyValueNet, planes: torch.Tensor) -> float:
    """The fraction of the value head's hidden ReLUs that fire on at least one of ``planes``.

    0 means a dead value head: it answers the same value for every position and search runs on the policy alone
    (learner.warmup_factor says how that happened). Runs the net as it plays (eval mode), without gradients."""
    hidden = model.value_head[:-2]  # 1x1 conv, BatchNorm, ReLU, flatten, Linear, ReLU: the hidden units
    with torch.no_grad():
        units = hidden(model.trunk(model.stem(planes)))
    return float((units.amax(dim=0) > 0).float().mean())


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def fold_batchnorm(model: PolicyValueNet) -> PolicyValueNet:
    """An inference-only copy with every BatchNorm folded into the conv before it (~10% fewer ops).

    Actors rebuild it after each weight update; the learner's model is never touched.
    """
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = copy.deepcopy(model).eval()
    for block in folded.trunk:
        block.conv1, block.bn1 = fuse_conv_bn_eval(block.conv1, block.bn1), nn.Identity()
        block.conv2, block.bn2 = fuse_conv_bn_eval(block.conv2, block.bn2), nn.Identity()
    for seq in (folded.stem, folded.policy_head, folded.value_head):
        seq[0], seq[1] = fuse_conv_bn_eval(seq[0], seq[1]), nn.Identity()
    # oneDNN's convolutions run fastest on NHWC tensors
    return folded.to(memory_format=torch.channels_last)
