"""The regressors Cond-DP trains: linear, or an MLP d → 64 → 64 → 1 whose first layer is the conditioned one."""

from __future__ import annotations

import itertools

import torch
from torch import nn


class Regressor(nn.Module):
    """``f(x) = offset + body(x M)``: a linear model or a ReLU MLP on public features.

    Args:
        in_features: d.
        hidden: widths of the hidden layers; ``[]`` is a linear model.
        input_map: optional fixed (d + 1, d + 1) matrix M: the first layer (then without its own bias) sees
            ``[x, 1] M`` (Cond-DP ``reparam`` feeds ``C^{1/2} [x; 1]``, the bias conditioned with the weights); stored
            as a buffer so packages carry it. None = plain ``Linear(d, ·)`` with a bias (no buffer).
        offset: a public constant added to the output (the midpoint of the declared label range), so the
            network starts at a sensible prediction without spending privacy on the label mean.

    Shapes: ``forward`` takes (B, d) standardised features and returns (B,) predictions.
    """

    def __init__(
        self,
        in_features: int,
        hidden: list[int] | tuple[int, ...] = (64, 64),
        input_map: torch.Tensor | None = None,
        offset: float = 0.0,
    ):
        super().__init__()
        widths = [in_features + (input_map is not None), *hidden, 1]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b, bias=i > 0 or input_map is None))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        self.body = nn.Sequential(*layers)
        self.offset = float(offset)
        if input_map is not None:
            self.register_buffer("input_map", torch.as_tensor(input_map, dtype=torch.float32))
        else:
            self.input_map = None

    @property
    def first(self) -> nn.Linear:
        """The input layer (the block Cond-DP conditions)."""
        return self.body[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_map is not None:
            x = torch.cat([x, torch.ones_like(x[:, :1])], 1) @ self.input_map
        return self.body(x).squeeze(-1) + self.offset
