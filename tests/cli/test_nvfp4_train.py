# SPDX-License-Identifier: MIT
"""train --precision nvfp4 (issue 30): NVIDIA's NVFP4 training recipe, as torchao 0.18's
nvfp4_mm_triton runs it on Blackwell GPUs (Triton only, so no CPU emulation to compare with),
against a reference written here from the recipe and built on torchao's NVFP4 quantizer:

- the operands cast to BF16 first (the recipe's kernels take BF16); E2M1 elements, an E4M3 scale
  per block of 16 and a per-tensor FP32 scale (NVFP4Tensor.to_nvfp4 with per_tensor_amax_to_scale);
- forward: input 1 x 16 along K, weight in 16 x 16 tiles (one block scale per tile), both rounded
  to nearest even; the product in FP32 cast to BF16;
- dgrad: grad_output 1 x 16 along N, rounded stochastically, times the forward's weight;
- wgrad: grad_output^T and input^T each through the random Hadamard transform along M (torchao's
  get_rht_matrix, signs from torch.rand(16) >= 0.5 of a generator seeded 0, the result cast to
  BF16), then 1 x 16 along M; grad_output's rounded stochastically;
- stochastic rounding: one torch.rand draw per element from the default generator, dgrad's
  before wgrad's, which ampscope reseeds before each micro-batch's AMP forward
  (seed * 1000003 + step * 131 + micro_batch).

Every step's loss equals the reference's bitwise; the reference itself is pinned: with neither
tiles nor stochastic rounding its quantizer is torchao's NVFP4Tensor bitwise, and the test shows
that each ingredient (tiles, stochastic rounding, the transform) changes the training."""
import copy
import json
import os
import tempfile
import unittest
import warnings

import torch

from common import as_float, ce_step, run_cli, small_mlp

warnings.filterwarnings("ignore")
from torchao.prototype.moe_training.nvfp4_training.hadamard_utils import get_rht_matrix  # noqa: E402
from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, f32_to_f4_unpacked  # noqa: E402
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale  # noqa: E402

STEPS, BATCH, LR, SEED = 5, 32, 0.5, 0
GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_stochastic(v):
    """v (|v| <= 6, FP32) to the E2M1 grid, between its neighbours lo < hi: up when u < (|v| - lo) /
    (hi - lo), u one torch.rand draw per element."""
    a = v.abs()
    idx = ((GRID <= a.unsqueeze(-1)).sum(-1) - 1).clamp(max=6)
    lo, hi = GRID[idx], GRID[idx + 1]
    u = torch.rand(v.shape)  # the default generator, one draw per element in the quantizer's layout
    r = torch.where(a >= 6.0, torch.tensor(6.0), torch.where(u < (a - lo) / (hi - lo), hi, lo))
    return torch.copysign(r, v)


def nvfp4(t, tiles=False, stochastic=False):
    """t [R, K] (FP32, R and K multiples of 16) quantized along K and dequantized: torchao's
    to_nvfp4 arithmetic (per-tensor scale amax / (448 * 6), block scale clamp(amax_b / 6 / pts,
    2^-6, 448) in E4M3, element = E2M1(x * (1 / pts) / block scale)), with one block amax per
    16 x 16 tile (tiles) and stochastic rounding as the recipe asks."""
    r, k = t.shape
    pts = per_tensor_amax_to_scale(t.abs().max())
    xb = t.reshape(-1, 16)
    bamax = xb.abs().amax(-1)
    if tiles:
        bamax = t.reshape(r // 16, 16, k // 16, 16).abs().amax((1, 3)).unsqueeze(1).expand(r // 16, 16, k // 16)
        bamax = bamax.reshape(-1)
    sbs = torch.clamp(bamax / 6.0 / pts, 2.0 ** -6, 448.0).to(torch.float8_e4m3fn).float()
    recip = (pts.reciprocal() * 1.0) / sbs
    y = torch.clamp(xb * recip.unsqueeze(-1), -6.0, 6.0)
    if stochastic:
        e = e2m1_stochastic(y)
    else:  # nearest even: torchao's own E2M1 rounding
        e = f4_unpacked_to_f32(f32_to_f4_unpacked(y.contiguous()))
    return (e * (pts * sbs).unsqueeze(-1)).reshape(t.shape)


SIGNS = tuple(int(s) for s in torch.where(torch.rand(16, generator=torch.Generator().manual_seed(0)) >= 0.5, 1, -1))
RHT = get_rht_matrix(SIGNS, "cpu", torch.float32, 16)


def rht(t):
    """t [rows, M] through the random Hadamard transform along M in blocks of 16 (M padded with
    zeros to a multiple of 16, the padding kept), cast to BF16."""
    t = torch.nn.functional.pad(t, (0, (16 - t.shape[1] % 16) % 16))
    return (t.reshape(-1, 16) @ RHT).to(torch.bfloat16).float().reshape(t.shape)


class Nvfp4Mm(torch.autograd.Function):
    """The recipe's three GEMMs (module docstring); opts turns tiles, stochastic rounding and the
    transform off one at a time, to show each matters."""

    @staticmethod
    def forward(ctx, x, w, opts):
        with torch.autocast("cpu", enabled=False):  # the recipe's own GEMM, not autocast's
            xb = x.reshape(-1, x.shape[-1]).to(torch.bfloat16).float()
            wq = nvfp4(w.to(torch.bfloat16).float(), tiles=opts["tiles"])
            ctx.save_for_backward(xb, wq)
            ctx.opts = opts
            xq = nvfp4(xb)
            return (xq @ wq.t()).to(torch.bfloat16).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, go):
        xb, wq = ctx.saved_tensors
        sr, t = ctx.opts["sr"], ctx.opts["rht"] or (lambda v: v)
        gob = go.reshape(-1, go.shape[-1]).to(torch.bfloat16).float()
        goq = nvfp4(gob, stochastic=sr)
        grad_input = (goq @ wq).to(go.dtype).reshape(*go.shape[:-1], wq.shape[1])
        got = nvfp4(t(gob.t().contiguous()), stochastic=sr)
        xt = nvfp4(t(xb.t().contiguous()))
        return grad_input, (got @ xt.t()).to(go.dtype), None


class RecipeLinear(torch.nn.Module):
    """A linear layer as the recipe trains it: Nvfp4Mm, then + bias in the product's dtype."""

    def __init__(self, lin, opts):
        super().__init__()
        self.weight, self.bias, self.opts = lin.weight, lin.bias, opts

    def forward(self, x):
        out = Nvfp4Mm.apply(x, self.weight, self.opts)
        return out + self.bias.to(out.dtype)


def nvfp4_mlp():
    """32 -> 64 -> 32 (Linear, GELU, LayerNorm, Linear): every GEMM dimension a multiple of 16."""
    torch.manual_seed(4)
    return small_mlp(32, 64, 32).train()


class Nvfp4Train(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = nvfp4_mlp()
        cls.path = os.path.join(cls.tmp.name, "mlp.pt")
        torch.jit.script(cls.model).save(cls.path)
        g = torch.Generator().manual_seed(12)
        cls.x = torch.randn(72, 32, generator=g) * 2  # batches of 32, 32, 8: the last one short, padded along M
        cls.y = torch.randint(0, 32, (72,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def reference(self, tiles=True, sr=True, transform=True):
        m = copy.deepcopy(self.model)
        opts = {"tiles": tiles, "sr": sr, "rht": rht if transform else None}
        for name in ("fc1", "fc2"):
            setattr(m, name, RecipeLinear(getattr(m, name), opts))
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        losses, cursor = [], 0
        for step in range(STEPS):
            b, e = cursor, min(len(self.x), cursor + BATCH)
            cursor = 0 if e >= len(self.x) else e
            # reseeded as ampscope reseeds the AMP side: the stochastic rounding draws the same
            losses.append(ce_step(m, opt, self.x[b:e], self.y[b:e], seed=SEED * 1000003 + step * 131))
        return losses

    def ampscope(self, d):
        out = os.path.join(d, "nvfp4.json")
        rc, so, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", STEPS, "--batch-size",
                             BATCH, "--lr", LR, "--precision", "nvfp4", "--no-scaler", "--loss", "ce", "--device",
                             "cpu", "--seed", SEED, "--no-db", "--json", out, "-q")
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            return json.load(f)

    def test_reference_quantizer_is_torchaos(self):
        t = torch.randn(48, 64) * 3
        t[5, 7] = 100.0
        want = NVFP4Tensor.to_nvfp4(t, per_tensor_scale=per_tensor_amax_to_scale(t.abs().max())).dequantize(
            torch.float32)
        self.assertTrue(torch.equal(nvfp4(t), want))
        self.assertFalse(torch.equal(nvfp4(t, tiles=True), want))  # the outlier's tile shares its scale
        torch.manual_seed(0)
        sr = nvfp4(t, stochastic=True)
        self.assertFalse(torch.equal(sr, want))
        # stochastic rounding is unbiased: the mean of many draws approaches the value itself
        mean = torch.stack([nvfp4(t, stochastic=True) for _ in range(400)]).mean(0)
        self.assertLess((mean - t).abs().mean().item(), 0.5 * (want - t).abs().mean().item())

    def test_every_step_as_the_recipe(self):
        want = self.reference()
        with tempfile.TemporaryDirectory() as d:
            got = self.ampscope(d)
        self.assertEqual(got["precision"], "nvfp4")
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want)
        # each ingredient of the recipe changes the training: the oracle tells them apart
        for variant in ({"tiles": False}, {"sr": False}, {"transform": False}):
            self.assertNotEqual(self.reference(**variant), want, variant)


if __name__ == "__main__":
    unittest.main()
