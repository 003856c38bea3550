"""Top-K sparse autoencoder (paper §2.1–2.2, §4.3; the HypotheSAEs design, written here from its description).

    a = TopK_K(W_enc (x - b_pre) + b_enc)  (ReLU on the kept values),   x_hat = W_dec a + b_pre

Loss: weighted normalised MSE ``sum_i w_i ||x_i - x_hat_i||^2 / sum_i w_i ||x_i - xbar_w||^2`` plus ``aux_coef`` x the
auxiliary-K loss: the top ``aux_k`` pre-activations of *dead* neurons (no activation for ``dead_steps`` steps)
reconstruct the residual ``x - x_hat`` (revival). Decoder columns stay unit-norm; their gradient is projected
orthogonal to them. With unit weights the forward pass and loss equal ``hypothesaes.sae.SparseAutoencoder`` on the
same parameters (``tests/pulse/test_pulse_sae.py``). Sample weights ``log(2 + comments)`` are ours (the paper uses
``log(upvotes - downvotes + comments)``; the shipped posts have no votes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TopKSAE(nn.Module):
    """Top-K SAE with ``M`` features on ``d``-dimensional embeddings.

    Args:
        input_dim: ``d``; n_features: ``M``; k: active features per input; aux_k: dead features used by the auxiliary
        loss (default ``2k``); dead_steps: steps without activation after which a feature counts as dead.
    """

    def __init__(self, input_dim: int, n_features: int, k: int, aux_k: int | None = None, dead_steps: int = 256):
        super().__init__()
        if not 0 < k <= n_features:
            raise ValueError(f"TopKSAE: need 0 < k <= n_features, got k={k}, n_features={n_features}")
        self.k, self.aux_k, self.dead_steps = k, min(2 * k, n_features) if aux_k is None else aux_k, dead_steps
        self.encoder = nn.Linear(input_dim, n_features, bias=False)
        self.decoder = nn.Linear(n_features, input_dim, bias=False)
        self.input_bias = nn.Parameter(torch.zeros(input_dim))
        self.neuron_bias = nn.Parameter(torch.zeros(n_features))
        self.register_buffer("steps_since_activation", torch.zeros(n_features, dtype=torch.long))

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, d) -> (N, M)``."""
        return self.encoder(x - self.input_bias) + self.neuron_bias

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Sparse activations ``(N, M)``: the top ``k`` pre-activations, ReLU'd, zeros elsewhere."""
        pre = self.pre_activations(x)
        vals, idx = torch.topk(pre, self.k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, idx, F.relu(vals))

    def forward(self, x: torch.Tensor, track: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns ``(x_hat (N, d), activations (N, M), pre-activations (N, M))``; ``track`` updates the
        dead-feature counters (training)."""
        pre = self.pre_activations(x)
        vals, idx = torch.topk(pre, self.k, dim=-1)
        act = torch.zeros_like(pre).scatter_(-1, idx, F.relu(vals))
        if track:
            self.steps_since_activation += 1
            self.steps_since_activation[act.sum(0) > 0] = 0
        return self.decoder(act) + self.input_bias, act, pre

    def loss(
        self, x: torch.Tensor, weights: torch.Tensor | None = None, aux_coef: float = 1 / 32, track: bool = False
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Weighted normalised MSE + ``aux_coef`` x auxiliary-K loss; ``weights (N,)`` (None = uniform).

        Returns ``(loss, {"nmse", "aux", "dead_fraction"})``.
        """
        recon, act, pre = self(x, track=track)
        nmse = normalised_mse(recon, x, weights)
        dead = (self.steps_since_activation > self.dead_steps).to(x.dtype)
        aux = torch.zeros((), dtype=x.dtype, device=x.device)
        if self.aux_k:
            vals, idx = torch.topk(pre * dead, self.aux_k, dim=-1)
            err_hat = self.decoder(torch.zeros_like(act).scatter_(-1, idx, F.relu(vals)))
            aux = normalised_mse(err_hat, x - recon.detach(), weights)
        return nmse + aux_coef * aux, {"nmse": nmse.detach(), "aux": aux.detach(), "dead_fraction": dead.mean()}

    @torch.no_grad()
    def init_from_data(self, x: torch.Tensor, generator: torch.Generator | None = None) -> None:
        """``b_pre`` = coordinate-wise median of ``x``; Xavier-uniform unit-norm decoder; encoder = decoder^T."""
        self.input_bias.copy_(torch.median(x, dim=0).values)
        fan_in, fan_out = self.decoder.weight.shape[1], self.decoder.weight.shape[0]
        bound = (6.0 / (fan_in + fan_out)) ** 0.5
        self.decoder.weight.copy_(torch.rand(self.decoder.weight.shape, generator=generator) * 2 * bound - bound)
        self.normalise_decoder()
        self.encoder.weight.copy_(self.decoder.weight.t())
        self.neuron_bias.zero_()

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Unit-norm decoder columns (one per feature)."""
        self.decoder.weight.div_(self.decoder.weight.norm(dim=0, keepdim=True))

    @torch.no_grad()
    def project_decoder_grad(self) -> None:
        """Remove the gradient component along each (unit) decoder column, so steps keep the norm to first order."""
        g = self.decoder.weight.grad
        if g is not None:
            g.sub_((self.decoder.weight * g).sum(0, keepdim=True) * self.decoder.weight)


def normalised_mse(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_i w_i ||pred_i - target_i||^2 / sum_i w_i ||target_i - mean_w(target)||^2`` (``(N, d)`` inputs)."""
    if weights is None:
        return F.mse_loss(pred, target) / F.mse_loss(target.mean(0, keepdim=True).expand_as(target), target)
    w = weights / weights.sum()
    centre = (w[:, None] * target).sum(0, keepdim=True)
    return (w * (pred - target).pow(2).sum(1)).sum() / (w * (target - centre).pow(2).sum(1)).sum()
