"""Center-Shift Index (CSI, both forms), object mass, pointing game, and trained-vs-random map similarity.

**The CSI definitions are ours** (notes §2, with the review's corrections); the paper's own definition is not
public. With ``Ŝ(p) = |S(p)| / Σ_q |S(q)|`` over pixels ``p = (row, col)``, the image centre
``c_img = ((H-1)/2, (W-1)/2)``, the object-box centre ``c_obj`` and ``D = ‖c_img − c_obj‖``:

- centroid form ``CSI_c = ⟨c_S − c_obj, c_img − c_obj⟩ / D²`` with ``c_S = Σ_p p Ŝ(p)``: 0 when the saliency
  centroid sits on the object, 1 at the image centre; a uniform map also scores 1, and the value is reported
  uncorrected;
- distance form ``CSI_d = (E_Ŝ‖p − c_obj‖ − E_Ŝ‖p − c_img‖) / D`` in ``[−1, 1]``: −1 on the object, +1 at the
  centre; it is reported minus its value for a uniform map (:func:`csi_distance_uniform`).

Both are undefined (NaN) when ``D < 1`` pixel, i.e. for centre placements, which get object mass and the pointing
game only. Maps are ``(N, H, W)``; boxes ``(N, 4)`` are ``(y0, x0, y1, x1)``, end-exclusive.
"""

from __future__ import annotations

import torch


def normalise(maps: torch.Tensor) -> torch.Tensor:
    """``Ŝ = |S| / Σ|S|`` per map, ``(N, H, W) -> (N, H, W)``; an all-zero map becomes uniform."""
    a = maps.abs().double()
    total = a.flatten(1).sum(1).view(-1, 1, 1)
    uniform = torch.full_like(a, 1.0 / a[0].numel())
    return torch.where(total > 0, a / total.clamp_min(1e-300), uniform)


def _grid(H: int, W: int) -> torch.Tensor:
    """Pixel coordinates ``(H, W, 2)`` as (row, col) floats."""
    r, c = torch.meshgrid(torch.arange(H, dtype=torch.float64), torch.arange(W, dtype=torch.float64), indexing="ij")
    return torch.stack([r, c], -1)


def centres(boxes: torch.Tensor, H: int, W: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(c_obj (N, 2), c_img (2,), D (N,))`` for ``boxes (N, 4)`` on an ``H × W`` image."""
    b = boxes.double()
    c_obj = torch.stack([(b[:, 0] + b[:, 2] - 1) / 2, (b[:, 1] + b[:, 3] - 1) / 2], 1)
    c_img = torch.tensor([(H - 1) / 2, (W - 1) / 2], dtype=torch.float64)
    return c_obj, c_img, (c_img - c_obj).norm(dim=1)


def csi_centroid(maps: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Centroid-form CSI ``(N,)`` (float64; NaN where ``D < 1``)."""
    _, H, W = maps.shape
    s = normalise(maps)
    c_s = torch.einsum("nhw,hwk->nk", s, _grid(H, W))
    c_obj, c_img, D = centres(boxes, H, W)
    out = ((c_s - c_obj) * (c_img - c_obj)).sum(1) / D.clamp_min(1e-12) ** 2
    return torch.where(D >= 1, out, torch.full_like(out, float("nan")))


def csi_distance(maps: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Distance-form CSI ``(N,)`` in ``[−1, 1]``, uncorrected (NaN where ``D < 1``)."""
    _, H, W = maps.shape
    s = normalise(maps)
    grid = _grid(H, W)
    c_obj, c_img, D = centres(boxes, H, W)
    d_obj = (grid[None] - c_obj[:, None, None]).norm(dim=-1)  # (N, H, W)
    d_img = (grid - c_img).norm(dim=-1)  # (H, W)
    out = ((s * d_obj).flatten(1).sum(1) - (s * d_img).flatten(1).sum(1)) / D.clamp_min(1e-12)
    return torch.where(D >= 1, out, torch.full_like(out, float("nan")))


def csi_distance_uniform(boxes: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """``CSI_d`` of a uniform map for each box ``(N,)``: the chance level the distance form subtracts."""
    return csi_distance(torch.ones(len(boxes), H, W), boxes)


def csi_distance_corrected(maps: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """``CSI_d − CSI_d(uniform)`` ``(N,)``: 0 for a featureless map, > 0 pulled to the centre."""
    return csi_distance(maps, boxes) - csi_distance_uniform(boxes, *maps.shape[1:])


def _in_box(boxes: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """Boolean masks ``(N, H, W)`` of the boxes."""
    r = torch.arange(H).view(1, H, 1)
    c = torch.arange(W).view(1, 1, W)
    b = boxes.view(-1, 4, 1, 1)
    return (r >= b[:, 0]) & (r < b[:, 2]) & (c >= b[:, 1]) & (c < b[:, 3])


def object_mass(maps: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """``M_obj = Σ_{p∈B} Ŝ(p)`` ``(N,)`` in ``[0, 1]``; a uniform map scores the box's share of the image."""
    return (normalise(maps) * _in_box(boxes, *maps.shape[1:])).flatten(1).sum(1)


def pointing_game(maps: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Whether ``argmax |S|`` (first in row-major order on ties) lies inside the box, ``(N,)`` bool."""
    _, H, W = maps.shape
    idx = maps.abs().flatten(1).argmax(1)
    return _in_box(boxes, H, W).flatten(1).gather(1, idx[:, None])[:, 0]


def spearman_abs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman rank correlation of ``|a|`` and ``|b|`` per map ``(N,)`` (ties get average ranks), Adebayo et al.
    2018's similarity between a trained and a randomised model's maps. ``a, b: (N, H, W)``."""
    from torchmetrics.functional import spearman_corrcoef

    x, y = a.abs().flatten(1).float(), b.abs().flatten(1).float()
    return spearman_corrcoef(x.T.contiguous(), y.T.contiguous())


def ssim_abs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """SSIM (Gaussian window, torchmetrics) of ``|a| / max|a|`` and ``|b| / max|b|`` per map ``(N,)``."""
    from torchmetrics.functional.image import structural_similarity_index_measure as ssim

    def scale(m):
        m = m.abs().float()
        return (m / m.flatten(1).amax(1).clamp_min(1e-300).view(-1, 1, 1)).unsqueeze(1)

    return ssim(scale(a), scale(b), data_range=1.0, reduction="none")
