"""A small ResNet with a policy head and a value head (AlphaZero's shape, scaled down)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


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
                 value_hidden: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(planes, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels), nn.ReLU())
        self.trunk = nn.Sequential(*(ResBlock(channels) for _ in range(blocks)))
        cells = height * width
        self.policy_head = nn.Sequential(nn.Conv2d(channels, 2, 1, bias=False), nn.BatchNorm2d(2), nn.ReLU(),
                                         nn.Flatten(), nn.Linear(2 * cells, actions))
        self.value_head = nn.Sequential(nn.Conv2d(channels, 1, 1, bias=False), nn.BatchNorm2d(1), nn.ReLU(),
                                        nn.Flatten(), nn.Linear(cells, value_hidden), nn.ReLU(),
                                        nn.Linear(value_hidden, 1), nn.Tanh())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.stem(x))
        return self.policy_head(h), self.value_head(h).squeeze(-1)


def build_model(game, channels: int, blocks: int) -> PolicyValueNet:
    h, w = game.board_shape
    return PolicyValueNet(game.num_planes, h, w, game.num_actions, channels, blocks)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
