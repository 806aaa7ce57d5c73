# SPDX-License-Identifier: MIT
"""train --fp8-all-gemms (issue 30): a training step under an FP8 recipe also quantizes the model's
own matrix products (a Conv1D-style addmm with a bias, torch.matmul of an activation and a weight,
attention's two bmm of activations) forward and backward, and in fp8 / fp8-delayed its
convolutions, in Python torch from the same wheel:
- fp8 and fp8-rowwise: each product as torchao 0.18's float8 autograd function
  (matmul_with_hp_or_float8_args) runs a linear of input mat1 and weight_hp_t mat2 (OracleProduct,
  itself checked against torchao's function), the linear layer as torchao's Float8Linear;
- mxfp8: the same GEMMs with torchao's MX blocks (RCEIL), the linear as torchao's MXFP8Linear;
- fp8-delayed: Transformer Engine's rule (TeDelayed of test_fp8_delayed_train.py) for every
  operand: mat1, mat2 and grad_output of each product, input, weight and grad_output of the
  convolution, each with its own history;
- a convolution in fp8: its input and weight cast to E4M3 (one scale each), the gradient arriving
  at it to E5M2, LibTorch's FP32 convolution and its backward in between.
Every step's AMP loss must equal the oracle's bitwise (no GradScaler)."""
import copy
import hashlib
import json
import os
import sys
import tempfile
import unittest
import warnings

import torch

from common import as_float, ce_step, file_order_batches, run_cli
from test_fp8_delayed_train import E4M3, E5M2, DelayedLinear, TeDelayed
from test_mxfp8_train import hardware_output, to_mxfp8_training

warnings.filterwarnings("ignore")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402
from torchao.float8.float8_linear import matmul_with_hp_or_float8_args  # noqa: E402
from torchao.float8.float8_training_tensor import LinearMMConfig, ScaledMMConfig  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
import fp8_oracle  # noqa: E402  (torchao's quantizers)

BF16 = torch.bfloat16
EMULATED = LinearMMConfig(*[ScaledMMConfig(True, False, False, False)] * 3)  # Float8Linear(emulate=True)'s
STEPS, BATCH, LR = 4, 32, 0.1  # 96 samples: 3 batches, the fourth step wraps


def scripted(cls, model, name):
    """cls.tmp, cls.model (`model` in train mode) and cls.path (its TorchScript, `name` in cls.tmp)."""
    cls.tmp = tempfile.TemporaryDirectory()
    cls.model = model.train()
    cls.path = os.path.join(cls.tmp.name, name)
    torch.jit.script(cls.model).save(cls.path)


GW_HP = "fp8-rowwise-gw-hp"  # fp8-rowwise --rowwise-gw-hp: torchao's recipe rowwise_with_gw_hp


def float8_config(recipe):
    if recipe == "fp8":
        return Float8LinearConfig(emulate=True)
    import dataclasses
    name = "rowwise_with_gw_hp" if recipe == GW_HP else "rowwise"
    return dataclasses.replace(Float8LinearConfig.from_recipe_name(name), emulate=True)


def pow2_tensorwise(t):
    """`t` cast to E4M3 with one power-of-two scale (torchao's cast of rowwise_with_gw_hp's weight
    for grad_input), as the emulated GEMM sees it."""
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    q = hp_tensor_to_float8_dynamic(t, torch.float8_e4m3fn, LinearMMConfig(), round_scales_to_power_of_2=True)
    return q._data.float() / q._scale


class ProductNet(torch.nn.Module):
    """x [B, 64] -> addmm(b1, x, w1) (a Conv1D) -> GELU -> 4 tokens of 16 -> torch.matmul by w2 ->
    scores bmm(a, t^T) -> softmax -> bmm(p, t) -> Conv1d(4, 4, 3) -> Linear(64, 32)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.w1 = torch.nn.Parameter(torch.randn(64, 64, generator=g) * 0.1)
        self.b1 = torch.nn.Parameter(torch.randn(64, generator=g) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(16, 16, generator=g) * 0.3)
        with torch.no_grad():
            self.w1[7] *= 1e-5  # the outlier's weights (Fp8AllGemmsTrain.setUpClass)
        torch.manual_seed(5)
        self.conv = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.head = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = torch.nn.functional.gelu(torch.addmm(self.b1, x, self.w1))
        t = h.reshape(-1, 4, 16)
        a = torch.matmul(t, self.w2)
        s = torch.bmm(a, t.transpose(1, 2))
        u = torch.bmm(torch.softmax(s, -1), t)
        return self.head(self.conv(u).reshape(-1, 64))


class EdgeProducts(torch.nn.Module):
    """x [B, 64] -> scores of 4 tokens of 16 as baddbmm(NaN buffer, t, t^T, beta=0, alpha=0.5) (a
    Megatron-style attention over torch.empty) or 0.5 * bmm(t, t^T) -> mm by W, + an mm with K = 0
    (edge) -> Linear(64, 32)."""

    def __init__(self, edge):
        super().__init__()
        g = torch.Generator().manual_seed(8)
        self.edge = edge
        self.register_buffer("junk", torch.full((1, 4, 4), float("nan")))
        self.W = torch.nn.Parameter(torch.randn(16, 16, generator=g) * 0.3)
        self.E = torch.nn.Parameter(torch.randn(0, 16))
        torch.manual_seed(8)
        self.head = torch.nn.Linear(64, 32)

    def forward(self, x):
        t = x.reshape(-1, 4, 16)
        if self.edge:
            s = torch.baddbmm(self.junk.expand(t.size(0), 4, 4), t, t.transpose(1, 2), beta=0.0, alpha=0.5)
        else:
            s = 0.5 * torch.bmm(t, t.transpose(1, 2))
        h = torch.matmul(torch.softmax(s, -1), t).reshape(-1, 16)
        h = torch.mm(h, self.W)
        if self.edge:
            h = h + torch.mm(h[:, :0], self.E)
        return self.head(h.reshape(-1, 64))


def quantized(t, recipe, element, axis):
    """`t` as the recipe quantizes it along `axis` (torchao's quantizers), FP32, in t's layout as
    torchao's elementwise casts keep it: a transposed operand gives a transposed result."""
    if t.dim() >= 2 and not t.is_contiguous() and t.transpose(-1, -2).is_contiguous():
        ax = axis % t.dim()
        swapped = {t.dim() - 1: t.dim() - 2, t.dim() - 2: t.dim() - 1}.get(ax, ax)
        return quantized(t.transpose(-1, -2), recipe, element, swapped).transpose(-1, -2)
    if recipe == "mxfp8":
        return fp8_oracle.mx(t, {"element": element, "axis": axis, "mx_scaling": "rceil"})[0].contiguous()
    scheme = "tensorwise" if recipe == "fp8" else "rowwise"  # GW_HP: rowwise
    moved = t.transpose(axis, -1)  # torchao's axiswise scales along the last dimension
    q = fp8_oracle.scaled_fp8(moved, {"scheme": scheme, "element": element, "axis": -1})[0]
    return q.transpose(axis, -1).contiguous()


class OracleProduct(torch.autograd.Function):
    """a [.., M, K] @ b [K, N] (or batched [B, M, K] @ [B, K, N]) as torchao's
    matmul_with_hp_or_float8_args runs input a and weight_hp_t b: forward a along K, b along K;
    backward grad_output along N with b along N for grad_a, grad_output and a along M for grad_b
    (tensorwise: one scale each; grad_output E5M2 in fp8, E4M3 in the others); FP32 products cast to
    `out` (BF16, the forward's dtype under autocast; FP32 where a `self` is added to it) and the
    gradients to BF16 (a linear's grad_output's dtype under autocast)."""

    FLIP = None  # a test's wrong axis: the operand ("a", "b", "b_for_a", "go_cols", "a_cols") quantized along the other

    @staticmethod
    def axis(name, axis):
        return -3 - axis if OracleProduct.FLIP == name else axis  # -1 <-> -2

    @staticmethod
    def forward(ctx, a, b, recipe, out=BF16):
        ctx.save_for_backward(a, b)
        ctx.recipe = recipe
        ax = OracleProduct.axis
        with torch.autocast("cpu", enabled=False):
            aq, bq = quantized(a, recipe, "e4m3", ax("a", -1)), quantized(b, recipe, "e4m3", ax("b", -2))
            if b.dim() == 3:
                return torch.bmm(aq, bq).to(out)
            return torch.mm(aq.reshape(-1, aq.shape[-1]), bq).to(out).reshape(*a.shape[:-1], b.shape[-1])

    @staticmethod
    def backward(ctx, go):
        a, b = ctx.saved_tensors
        r = ctx.recipe
        per_slice = r != "fp8"
        ge = "e4m3" if per_slice else "e5m2"
        batched = b.dim() == 3
        go2 = go if batched else go.reshape(-1, go.shape[-1])
        ax = OracleProduct.axis
        rows = quantized(go2, r, ge, -1)
        b_for_a = quantized(b, r, "e4m3", ax("b_for_a", -1 if per_slice else -2))
        grad_a = torch.matmul(rows, b_for_a.transpose(-1, -2)).to(BF16).reshape(a.shape)
        cols = quantized(go2, r, ge, ax("go_cols", -2)) if per_slice else rows
        a2 = a if batched else a.reshape(-1, a.shape[-1])
        if r == GW_HP:  # grad_input with the weight's power-of-two tensorwise cast, grad_weight unquantized
            grad_a = torch.matmul(rows, pow2_tensorwise(b).transpose(-1, -2)).to(BF16).reshape(a.shape)
            grad_b = torch.matmul(go2.transpose(-1, -2), a2.to(go.dtype)).to(BF16).transpose(-1, -2)
            return grad_a, grad_b, None, None
        a_cols = quantized(a2, r, "e4m3", ax("a_cols", -2 if per_slice else -1))
        grad_b = torch.matmul(cols.transpose(-1, -2), a_cols).to(BF16).transpose(-1, -2)
        return grad_a, grad_b, None, None


class FakeCast(torch.autograd.Function):
    """The cast values forward, the gradient straight through in BF16."""

    @staticmethod
    def forward(ctx, t, cast):
        return cast(t)

    @staticmethod
    def backward(ctx, g):
        return g.to(BF16), None


class GradCast(torch.autograd.Function):
    """The values on forward, the gradient arriving cast backward."""

    @staticmethod
    def forward(ctx, t, cast):
        ctx.cast = cast
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        return ctx.cast(g).to(g.dtype), None


class OracleNet(torch.nn.Module):
    """ProductNet (a copy) as the recipe trains it with every GEMM in FP8."""

    def __init__(self, net, recipe, te=None):
        super().__init__()
        self.net, self.recipe, self.te = copy.deepcopy(net), recipe, te
        if recipe in ("fp8", "fp8-rowwise", GW_HP):
            convert_to_float8_training(self.net, config=float8_config(recipe))
        elif recipe == "mxfp8":
            to_mxfp8_training(self.net)
        else:
            self.net.head = DelayedLinear(self.net.head, "head", te)

    def cast(self, slot, fmt):
        if self.te is not None:
            return lambda t: self.te.cast(t, slot, fmt)
        return lambda t: quantized(t, "fp8", "e4m3" if fmt is E4M3 else "e5m2", -1)

    def product(self, slot, a, b):
        if self.te is None:
            return OracleProduct.apply(a, b, self.recipe)
        with torch.autocast("cpu", enabled=False):
            aq, bq = FakeCast.apply(a, self.cast(slot + "mat1", E4M3)), FakeCast.apply(b, self.cast(slot + "mat2", E4M3))
            return GradCast.apply(torch.matmul(aq, bq), self.cast(slot + "grad_output", E5M2)).to(BF16)

    def conv(self, u):
        c = self.net.conv
        if self.recipe not in ("fp8", "fp8-delayed"):
            return c(u)  # the finer recipes leave convolutions to autocast
        with torch.autocast("cpu", enabled=False):
            w = (lambda t: self.te.cast_weight(t, "conv/weight")) if self.te is not None else self.cast("", E4M3)
            uq, wq = FakeCast.apply(u, self.cast("conv/input", E4M3)), FakeCast.apply(c.weight, w)
            out = GradCast.apply(torch.nn.functional.conv1d(uq, wq, None, 1, 1), self.cast("conv/grad", E5M2))
            return out.to(BF16) + c.bias.to(BF16).reshape(-1, 1)

    def forward(self, x):
        n = self.net
        h = torch.nn.functional.gelu(self.product("addmm/", x, n.w1) + n.b1.to(BF16))
        t = h.reshape(-1, 4, 16)
        a = self.product("mm/", t, n.w2)
        s = self.product("bmm0/", a, t.transpose(1, 2))
        u = self.product("bmm1/", torch.softmax(s, -1), t)
        return n.head(self.conv(u).reshape(-1, 64))


class Fp8AllGemmsTrain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        scripted(cls, ProductNet(), "net.pt")
        g = torch.Generator().manual_seed(9)
        cls.x = torch.randn(96, 64, generator=g) * (1.0 + torch.arange(96.0).unsqueeze(1) / 20.0)
        # sample 4: an outlier 30000 times its other values in the first of its row's two MX blocks, with
        # weights as small (its product stays the others'): rowwise scales the whole row by it and the
        # second block's values fall into E4M3's subnormals; MX scales that block by its own amax (E4M3 is
        # a float format: elsewhere the two recipes' power-of-two scales give the same values)
        cls.x[4] = torch.randn(64, generator=g)
        cls.x[4, 7] = 30000.0
        cls.y = torch.randint(0, 32, (96,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def batches(self):
        return file_order_batches(self.x, self.y, STEPS, BATCH)

    def oracle_losses(self, recipe):
        te = TeDelayed(1024, 0) if recipe == "fp8-delayed" else None
        m = OracleNet(self.model, recipe, te)
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        losses = []
        with hardware_output():  # MXFP8Linear's GEMM written in BF16 as the hardware writes it
            for x, y in self.batches():
                losses.append(ce_step(m, opt, x, y))
                if te is not None:
                    te.update()
                    te.end_step()
        return losses

    def train(self, recipe, *extra, steps=STEPS):
        out = os.path.join(self.tmp.name, recipe + ".json")
        rc, _, err = run_cli("train", "--model", self.path, "--data", self.data, "--steps", steps, "--batch-size",
                             BATCH, "--lr", LR, "--precision", recipe, "--no-scaler", "--loss", "ce", "--device", "cpu",
                             "--no-db", "--json", out, "--force", "-q", *extra)
        self.assertIn(rc, (0, 1), err)
        with open(out) as f:
            return json.load(f)

    def test_oracle_product_is_torchao(self):
        """OracleProduct of a 2-D product is torchao's own training GEMMs with mat2 as weight_hp_t
        (fp8, fp8-rowwise: its float8 function; mxfp8: MXFP8Linear, the products written in BF16 as
        the hardware writes them): outputs and both gradients bitwise, on operands with an outlier
        each (a, W, grad_output) so that an operand quantized along the other axis gives other
        values in the recipes of a scale per row or block (checked: each such variant differs)."""
        g = torch.Generator().manual_seed(2)
        a0 = (torch.randn(64, 64, generator=g) * 5).to(BF16)
        a0[3, 5] = 3000.0
        w0 = torch.randn(32, 64, generator=g)
        w0[4, 9] = 1e4
        go = torch.randn(64, 32, generator=g).to(BF16)
        go[7, 2] = 1e4

        def oracle(recipe):
            a, w = a0.clone().requires_grad_(), w0.clone().requires_grad_()
            out = OracleProduct.apply(a, w.t(), recipe)  # transposed, as a linear's weight_hp_t
            out.backward(go)
            return [out.float(), a.grad.float(), w.grad.float()]

        def torchao(recipe):
            a = a0.clone().requires_grad_()
            if recipe == "mxfp8":
                lin = torch.nn.Linear(64, 32, bias=False)
                with torch.no_grad():
                    lin.weight.copy_(w0)
                net = torch.nn.Sequential(lin)
                to_mxfp8_training(net)
                with hardware_output():
                    out = net(a)
                    out.backward(go)
                return [out.float(), a.grad.float(), net[0].weight.grad.float()]
            w = w0.clone().requires_grad_()
            out = matmul_with_hp_or_float8_args.apply(a, w.t(), EMULATED, float8_config(recipe))
            out.backward(go)
            return [out.float(), a.grad.float(), w.grad.float()]

        for recipe in ("fp8", "fp8-rowwise", GW_HP, "mxfp8"):
            want = torchao(recipe)
            for x, y in zip(oracle(recipe), want):
                self.assertTrue(torch.equal(x, y), recipe)
            if recipe == "fp8":
                continue  # one scale per tensor: the same along either axis
            for flip in ("a", "b") + (() if recipe == GW_HP else ("b_for_a", "go_cols", "a_cols")):
                OracleProduct.FLIP = flip
                try:
                    self.assertFalse(all(torch.equal(x, y) for x, y in zip(oracle(recipe), want)), (recipe, flip))
                finally:
                    OracleProduct.FLIP = None

    def test_every_step_bitwise_as_the_recipes(self):
        losses = {}
        for recipe in ("fp8", "fp8-rowwise", GW_HP, "mxfp8", "fp8-delayed"):
            got = self.train("fp8-rowwise", "--rowwise-gw-hp", "--fp8-all-gemms") if recipe == GW_HP else \
                self.train(recipe, "--fp8-all-gemms")
            self.assertTrue(got["fp8_all_gemms"], recipe)
            losses[recipe] = [as_float(s["loss_amp"]) for s in got["steps"]]
            self.assertEqual(losses[recipe], self.oracle_losses(recipe), recipe)
        self.assertEqual(len(set(tuple(v) for v in losses.values())), 5, "the recipes train differently")
        # and without the flag the products are not quantized (the losses differ)
        plain = [as_float(s["loss_amp"]) for s in self.train("fp8")["steps"]]
        self.assertNotEqual(plain, losses["fp8"])

    def test_resume_carries_every_history(self):
        """fp8-delayed: 2 steps, a checkpoint, 2 more resumed are the 4 steps straight, bitwise: every
        product's and the convolution's histories (mat1, mat2, input, weight, grad_output) travel in
        the checkpoint, and the resumed run finds each (no warning of a history unused or missing)."""
        straight = [as_float(s["loss_amp"]) for s in self.train("fp8-delayed", "--fp8-all-gemms")["steps"]]
        with tempfile.TemporaryDirectory() as d:
            first = self.train("fp8-delayed", "--fp8-all-gemms", "--checkpoint-every", 2, "--checkpoint-dir", d,
                               steps=2)
            resumed = self.train("fp8-delayed", "--fp8-all-gemms", "--resume", first["checkpoints"][0])
        self.assertEqual([as_float(s["loss_amp"]) for s in resumed["steps"]], straight[2:])
        self.assertFalse(resumed["policy_changed"])
        self.assertFalse([w for w in resumed["warnings"] if "amax histor" in w], resumed["warnings"])

    def test_summary_says_what_trained_in_fp8(self):
        base = ("train", "--model", self.path, "--data", self.data, "--steps", 1, "--batch-size", BATCH,
                "--no-scaler", "--loss", "ce", "--no-db", "--fp8-all-gemms")
        rc, so, se = run_cli(*base, "--precision", "fp8")
        self.assertIn(rc, (0, 1), se)
        self.assertIn("FP8 GEMMs: every matrix product (linear layers, the model's own products and convolutions), "
                      "forward and backward", so)
        rc, so, se = run_cli(*base, "--precision", "fp8-rowwise", "--rowwise-gw-hp")
        self.assertIn(rc, (0, 1), se)
        self.assertIn("FP8 GEMMs: every matrix product (linear layers, the model's own products), forward and "
                      "backward", so)
        self.assertIn("fp8-rowwise: torchao's rowwise_with_gw_hp (the weight gradient's GEMM in high precision)", so)

    def test_warnings_name_what_stayed_unquantized(self):
        w = " ".join(self.train("fp8", steps=1)["warnings"])
        # the addmm and the matmul by w2 (an mm of a linear); attention's bmm are not counted
        self.assertIn("fp8 training (its first forward): 2 matrix products of the model ran unquantized in BF16 "
                      "(aten::addmm 1, aten::mm 1)", w)
        self.assertIn("--fp8-all-gemms quantizes them too", w)
        # nvfp4 trains no product (--fp8-all-gemms is refused with it): the warning does not offer it
        w = " ".join(self.train("nvfp4", steps=1)["warnings"])
        self.assertIn("nvfp4 training (its first forward): 2 matrix products", w)
        self.assertNotIn("--fp8-all-gemms quantizes them too", w)
        self.assertIn("NVIDIA's NVFP4 recipe defines its linear layers' GEMMs only", w)
        w = " ".join(self.train("fp8-rowwise", "--fp8-all-gemms", steps=1)["warnings"])
        self.assertNotIn("matrix products of the model ran unquantized", w)
        self.assertIn("fp8-rowwise: 1 convolution calls ran unquantized under autocast (BF16", w)
        self.assertEqual(self.train("fp8", "--fp8-all-gemms", steps=1)["warnings"], [])
        # the only linear layer kept in BF16 and no --fp8-all-gemms: nothing ran in FP8, said so
        w = " ".join(self.train("fp8", "--keep-bf16", "head", steps=1)["warnings"])
        self.assertIn("fp8 training (its first forward): no GEMM of the model ran in FP8", w)

    def test_a_bf16_module_without_a_gemm_is_said_in_train_and_replay(self):
        """--keep-bf16 conv: the recipes quantize no convolution without --fp8-all-gemms, so keeping it
        in BF16 changes nothing; run says so, train and replay said nothing."""
        said = "fp8: kept in BF16 'conv' (keep_bf16[0]) but left no GEMM out of FP8"
        self.assertIn(said, " ".join(self.train("fp8", "--keep-bf16", "conv", steps=1)["warnings"]))
        self.assertNotIn("left no GEMM", " ".join(self.train("fp8", "--keep-bf16", "head", steps=1)["warnings"]))
        ckpt, batch = os.path.join(self.tmp.name, "kept.pt"), os.path.join(self.tmp.name, "kept-batch.pt")
        torch.save({"model": self.model.state_dict(),
                    "optimizer": torch.optim.SGD(self.model.parameters(), lr=LR).state_dict()}, ckpt)
        torch.save({"inputs": self.x[:BATCH], "labels": self.y[:BATCH]}, batch)
        out = os.path.join(self.tmp.name, "kept.json")
        rc, _, err = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", batch, "--precision", "fp8",
                             "--keep-bf16", "conv", "--loss", "ce", "--no-db", "--json", out, "--force", "-q")
        self.assertIn(rc, (0, 1), err)
        with open(out) as f:
            self.assertIn(said, " ".join(json.load(f)["warnings"]))

    def test_the_summary_says_each_warning_once(self):
        """The terminal summary printed every warning twice (above and below the step table)."""
        rc, out, err = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--batch-size", BATCH,
                               "--precision", "fp8", "--no-scaler", "--loss", "ce", "--device", "cpu", "--no-db")
        self.assertIn(rc, (0, 1), err)
        self.assertEqual(out.count("matrix products of the model ran unquantized"), 1, out)
        self.assertGreater(out.index("warning:"), out.index("final losses"), out)  # after the table, where it is read

    def test_beta_zero_and_empty_products(self):
        """baddbmm(junk, a, b, beta=0, alpha=0.5) ignores its NaN self, as PyTorch does (was: NaN
        losses), and a product with K = 0 trains (was: exit 3 on a reshape); the first step's loss is
        that of the same model written 0.5 * bmm(a, b) without the empty product."""
        losses = {}
        for name, net in (("edge", EdgeProducts(True)), ("plain", EdgeProducts(False))):
            path = os.path.join(self.tmp.name, name + ".pt")
            torch.jit.script(net.train()).save(path)
            for recipe in ("fp8", "fp8-rowwise", "mxfp8", "fp8-delayed"):
                out = os.path.join(self.tmp.name, f"{name}-{recipe}.json")
                rc, _, err = run_cli("train", "--model", path, "--data", self.data, "--steps", 2, "--batch-size",
                                     BATCH, "--precision", recipe, "--fp8-all-gemms", "--no-scaler", "--loss", "ce",
                                     "--no-db", "--json", out, "--force", "-q")
                self.assertEqual(rc, 0, (name, recipe, err))
                with open(out) as f:
                    losses[name, recipe] = [as_float(s["loss_amp"]) for s in json.load(f)["steps"]]
                self.assertTrue(all(v == v and abs(v) < 1e30 for v in losses[name, recipe]), (name, recipe))
        for recipe in ("fp8", "fp8-rowwise", "mxfp8", "fp8-delayed"):
            self.assertEqual(losses["edge", recipe][0], losses["plain", recipe][0], recipe)

    def test_refused_where_no_recipe_follows(self):
        for precision, extra in (("nvfp4", ()), ("bf16", ()), ("fp8", ("--no-autocast",))):
            rc, _, err = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--precision",
                                 precision, "--fp8-all-gemms", "--loss", "ce", "--no-db", *extra)
            self.assertEqual(rc, 2, err)
            self.assertIn("--fp8-all-gemms", err)


class ParamProducts(torch.nn.Module):
    """x [B, 64] as 4 tokens of 16 -> bmm(P, t) (a parameter as mat1) -> addmm(b, ., Q) (a parameter as
    mat2) -> Linear(64, 32): each parameter's gradient is one product's backward GEMM."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(6)
        self.P = torch.nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.Q = torch.nn.Parameter(torch.randn(16, 16, generator=g) * 0.3)
        self.b = torch.nn.Parameter(torch.randn(16, generator=g) * 0.1)
        torch.manual_seed(6)
        self.head = torch.nn.Linear(64, 32)

    def forward(self, x):
        t = x.reshape(-1, 4, 16)
        u = torch.bmm(self.P.unsqueeze(0).expand(t.size(0), 4, 4), t)
        v = torch.addmm(self.b, u.reshape(-1, 16), self.Q)
        return self.head(v.reshape(-1, 64))


class OracleParamProducts(torch.nn.Module):
    """A copy of `net` whose linear layers train as the recipe's (torchao); forward: ParamProducts'
    products as OracleProduct (subclasses: other models')."""

    def __init__(self, net, recipe):
        super().__init__()
        self.net, self.recipe = copy.deepcopy(net), recipe
        if recipe == "mxfp8":
            to_mxfp8_training(self.net)
        else:
            convert_to_float8_training(self.net, config=float8_config(recipe))

    def forward(self, x):
        n = self.net
        t = x.reshape(-1, 4, 16)
        u = OracleProduct.apply(n.P.unsqueeze(0).expand(t.size(0), 4, 4), t, self.recipe)
        v = OracleProduct.apply(u.reshape(-1, 16), n.Q, self.recipe) + n.b.to(BF16)
        return n.head(v.reshape(-1, 64))


class SelfProducts(torch.nn.Module):
    """x [B, 64] as 4 tokens of 16 -> scores baddbmm(S, t, t^T, beta=0) (S a parameter whose values
    are ignored), halved in place -> softmax -> bmm by t -> addmm(C, ., Q, beta=0.5, alpha=2)
    (C [1, 16]: not a bias, added to the FP32 product) -> Linear(64, 32)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(14)
        self.S = torch.nn.Parameter(torch.randn(1, 4, 4, generator=g))
        self.C = torch.nn.Parameter(torch.randn(1, 16, generator=g) * 0.1)
        self.Q = torch.nn.Parameter(torch.randn(16, 16, generator=g) * 0.3)
        torch.manual_seed(14)
        self.head = torch.nn.Linear(64, 32)

    def forward(self, x):
        t = x.reshape(-1, 4, 16)
        s = torch.baddbmm(self.S.expand(t.size(0), 4, 4), t, t.transpose(1, 2), beta=0.0)
        s.mul_(0.5)  # in place on the product (was: exit 3, "a view ... modified inplace")
        u = torch.bmm(torch.softmax(s, -1), t).reshape(-1, 16)
        return self.head(torch.addmm(self.C, u, self.Q, beta=0.5, alpha=2.0).reshape(-1, 64))


class OracleSelfProducts(OracleParamProducts):
    """SelfProducts as ampscope trains a product with a `self`: the FP32 product, beta * self +
    alpha * product in FP32, cast to BF16; the gradients BF16 as a linear's; S's gradient PyTorch's,
    zeros (S * 0 in the graph)."""

    def forward(self, x):
        n, r = self.net, self.recipe
        t = x.reshape(-1, 4, 16)
        s = (OracleProduct.apply(t, t.transpose(1, 2), r, torch.float32) * 1.0).to(BF16) + (n.S * 0).sum()
        s.mul_(0.5)
        u = OracleProduct.apply(torch.softmax(s, -1), t, r).reshape(-1, 16)
        v = (n.C.float() * 0.5 + OracleProduct.apply(u, n.Q, r, torch.float32) * 2.0).to(BF16)
        return n.head(v.reshape(-1, 64))


class Fp8AllGemmsReplay(unittest.TestCase):
    """replay --fp8-all-gemms: a job that trained ParamProducts with every GEMM in FP8 (SGD with
    momentum, BF16 autocast, no GradScaler) saves its state after K steps; the replay of step K+1
    gives its AMP loss and every updated parameter bitwise (sha256). Sample 4 holds an outlier 30000
    times its other values (t[4, 0, 0]): each backward GEMM crushes different values of it along its
    own reduction dimension, so a parameter's update tells the axes apart."""

    K = 2

    @classmethod
    def setUpClass(cls):
        scripted(cls, ParamProducts(), "products.pt")
        g = torch.Generator().manual_seed(12)
        cls.batches = [(torch.randn(32, 64, generator=g), torch.randint(0, 32, (32,), generator=g))
                       for _ in range(cls.K + 1)]
        cls.batches[-1][0][4, 0] = 30000.0
        cls.batch = os.path.join(cls.tmp.name, "batch.pt")
        torch.save({"inputs": cls.batches[-1][0], "labels": cls.batches[-1][1]}, cls.batch)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def job(self, recipe):
        m = OracleParamProducts(self.model, recipe)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        with hardware_output():
            for x, y in self.batches[:-1]:
                ce_step(m, opt, x, y)
            ckpt = os.path.join(self.tmp.name, recipe + "-ckpt.pt")
            torch.save({"model": m.net.state_dict(), "optimizer": opt.state_dict()}, ckpt)
            loss = ce_step(m, opt, *self.batches[-1])
        return ckpt, loss, {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()
                            for n, p in m.net.named_parameters()}

    def test_step_bitwise_as_the_recipes(self):
        updated = {}
        for recipe in ("fp8", "fp8-rowwise", "mxfp8"):
            ckpt, loss, shas = self.job(recipe)
            out = os.path.join(self.tmp.name, recipe + "-replay.json")
            rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", self.batch,
                                 "--precision", recipe, "--fp8-all-gemms", "--optimizer", "sgd", "--json", out,
                                 "--no-db", "--force")
            self.assertIn(rc, (0, 1), se)
            self.assertIn("every matrix product in FP8", so)
            with open(out) as f:
                got = json.load(f)
            self.assertTrue(got["inputs"]["fp8_all_gemms"])
            step = got["steps"][-1]
            self.assertEqual(as_float(step["loss_amp"]), loss, recipe)
            for p in step["params"]:
                self.assertEqual(p["sha256_amp"], shas[p["name"]], f"{recipe} {p['name']}")
            updated[recipe] = shas
        # tensorwise and rowwise update differently; rowwise and MX agree on these values (power-of-two
        # scales of a float format differ only where values fall below its normals: the block of 32
        # and the whole row meet here; Fp8AllGemmsTrain separates them)
        self.assertNotEqual(updated["fp8"], updated["fp8-rowwise"])

    def test_products_with_a_self(self):
        """Products with a `self` that is not a bias, replayed, every parameter bitwise the oracle's:
        baddbmm's beta = 0 ignores S's values, yet S gets PyTorch's gradient for it (zeros: weight
        decay moves it; was: none, S unchanged); addmm's C * 0.5 + 2 * product in FP32 (was: the
        gradients of u and Q left in FP32, not BF16 as a linear's)."""
        path = os.path.join(self.tmp.name, "selfproducts.pt")
        torch.jit.script(SelfProducts().train()).save(path)
        for recipe in ("fp8", "fp8-rowwise", "mxfp8"):
            m = OracleSelfProducts(SelfProducts(), recipe)
            opt = torch.optim.SGD(m.parameters(), lr=0.5, weight_decay=0.25)
            ckpt = os.path.join(self.tmp.name, recipe + "-self-ckpt.pt")
            torch.save({"model": m.net.state_dict(), "optimizer": opt.state_dict()}, ckpt)
            with hardware_output():
                loss = ce_step(m, opt, *self.batches[-1])
            out = os.path.join(self.tmp.name, recipe + "-self.json")
            rc, _, se = run_cli("replay", "--model", path, "--checkpoint", ckpt, "--batch", self.batch, "--precision",
                                recipe, "--fp8-all-gemms", "--optimizer", "sgd", "--json", out, "--no-db", "--force")
            self.assertIn(rc, (0, 1), se)
            with open(out) as f:
                step = json.load(f)["steps"][-1]
            self.assertEqual(as_float(step["loss_amp"]), loss, recipe)
            shas = {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()
                    for n, p in m.net.named_parameters()}
            for p in step["params"]:
                self.assertEqual(p["sha256_amp"], shas[p["name"]], (recipe, p["name"]))

    def test_replay_says_what_stayed_unquantized(self):
        """As train does: the products a recipe left in BF16 (was: nothing said), and a replay in which
        no GEMM ran in FP8 at all (the only linear kept in BF16: was a plain "mxfp8" header)."""
        ckpt, _, _ = self.job("fp8")
        base = ("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", self.batch, "--optimizer", "sgd",
                "--no-db", "--force")
        for extra, said, unsaid in (
                (("--precision", "fp8"), "fp8 training (its first forward): 1 matrix products of the model ran "
                 "unquantized in BF16 (aten::addmm 1)", "no GEMM of the model ran in FP8"),
                (("--precision", "mxfp8", "--keep-bf16", "head"), "mxfp8 training (its first forward): no GEMM of the "
                 "model ran in FP8", None),
                (("--precision", "fp8", "--fp8-all-gemms"), None, "ran unquantized")):
            out = os.path.join(self.tmp.name, "said.json")
            rc, _, se = run_cli(*base, *extra, "--json", out)
            self.assertIn(rc, (0, 1), se)
            with open(out) as f:
                w = " ".join(json.load(f)["warnings"])
            if said:
                self.assertIn(said, w, extra)
            if unsaid:
                self.assertNotIn(unsaid, w, extra)

    def test_refused_without_an_fp8_recipe(self):
        rc, _, err = run_cli("replay", "--model", self.path, "--checkpoint", self.path, "--batch", self.batch,
                             "--precision", "bf16", "--fp8-all-gemms", "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("--fp8-all-gemms", err)


class GwHpNet(torch.nn.Module):
    """x [B, 32] -> Conv1d(1, 1, 1) (BF16 under autocast: torchao's high-precision weight-gradient GEMM
    multiplies grad_output by the layer's input, BF16 as on CUDA, where autocast gives Float8Linear a
    BF16 input) -> Linear(32, 64) -> GELU -> Linear(64, 32)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(13)
        self.scale = torch.nn.Conv1d(1, 1, 1)
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = self.scale(x.unsqueeze(1)).squeeze(1)
        return self.fc2(torch.nn.functional.gelu(self.fc1(h)))


def gw_hp_training(model, rowwise_weight=False):
    """`model` under torchao's rowwise_with_gw_hp; `rowwise_weight`: its weight for grad_input
    scaled per column (AXISWISE) instead of per tensor, a variant the test data must tell apart."""
    import dataclasses
    from torchao.float8.config import CastConfig, ScalingGranularity
    cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise_with_gw_hp"), emulate=True)
    if rowwise_weight:
        axiswise = CastConfig(scaling_granularity=ScalingGranularity.AXISWISE, target_dtype=torch.float8_e4m3fn)
        cfg = dataclasses.replace(cfg, cast_config_weight_for_grad_input=axiswise)
    return convert_to_float8_training(model, config=cfg)


class RowwiseGwHp(unittest.TestCase):
    """train / replay --precision fp8-rowwise --rowwise-gw-hp against torchao 0.18's recipe
    rowwise_with_gw_hp itself (Float8LinearConfig.from_recipe_name, emulate=True): rowwise E4M3
    forward; grad_input from rowwise E4M3 grad_output and the weight with one power-of-two scale;
    grad_weight from grad_output and the input unquantized. Every step's loss, and a replayed step's
    parameters (sha256), bitwise; the plain rowwise recipe trains differently."""

    STEPS = 5

    @classmethod
    def setUpClass(cls):
        scripted(cls, GwHpNet(), "gwhp.pt")
        g = torch.Generator().manual_seed(21)
        cls.x = torch.randn(40, 32, generator=g) * 3  # batches of 16: the last one is 8
        cls.x[3, 5] = 200.0
        cls.y = torch.randint(0, 32, (40,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def train(self, *extra):
        out = os.path.join(self.tmp.name, "gwhp.json")
        rc, _, err = run_cli("train", "--model", self.path, "--data", self.data, "--steps", self.STEPS, "--batch-size",
                             16, "--lr", 0.5, "--precision", "fp8-rowwise", "--no-scaler", "--loss", "ce", "--device",
                             "cpu", "--no-db", "--json", out, "--force", "-q", *extra)
        self.assertIn(rc, (0, 1), err)
        with open(out) as f:
            return json.load(f)

    def test_every_step_bitwise_as_torchao(self):
        m = gw_hp_training(copy.deepcopy(self.model))
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        want = [ce_step(m, opt, x, y) for x, y in file_order_batches(self.x, self.y, self.STEPS, 16)]
        got = self.train("--rowwise-gw-hp")
        self.assertTrue(got["rowwise_gw_hp"])
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want)
        self.assertNotEqual([as_float(s["loss_amp"]) for s in self.train()["steps"]], want, "plain rowwise differs")

    def test_replayed_step_bitwise_as_torchao(self):
        """... from a state whose fc2 sees fc1's unit 7 through weights 1e-4 of the others: the
        variant with a per-column weight for grad_input (no power-of-two tensorwise scale crushing
        that column) updates fc1 otherwise from the same checkpoint."""
        batches = list(file_order_batches(self.x, self.y, 3, 16))
        m = gw_hp_training(copy.deepcopy(self.model))
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for x, y in batches[:2]:
            ce_step(m, opt, x, y)
        with torch.no_grad():
            m.fc2.weight[:, 7] *= 1e-4
        ckpt = os.path.join(self.tmp.name, "gwhp-ckpt.pt")
        torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, ckpt)
        batch = os.path.join(self.tmp.name, "gwhp-batch.pt")
        torch.save({"inputs": batches[2][0], "labels": batches[2][1]}, batch)
        updated = {}
        for variant in (True, False):
            v = gw_hp_training(copy.deepcopy(self.model), rowwise_weight=variant)
            v.load_state_dict(m.state_dict())
            o = torch.optim.SGD(v.parameters(), lr=0.1, momentum=0.9)
            o.load_state_dict(copy.deepcopy(opt.state_dict()))  # its momentum buffers are stepped in place
            loss = ce_step(v, o, *batches[2])
            updated[variant] = {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()
                                for n, p in v.named_parameters()}
        self.assertNotEqual(updated[True], updated[False], "the data tells the weight's scaling apart")
        out = os.path.join(self.tmp.name, "gwhp-replay.json")
        rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", batch, "--precision",
                             "fp8-rowwise", "--rowwise-gw-hp", "--optimizer", "sgd", "--json", out, "--no-db", "--force")
        self.assertIn(rc, (0, 1), se)
        self.assertIn("rowwise_with_gw_hp", so)
        with open(out) as f:
            step = json.load(f)["steps"][-1]
        self.assertEqual(as_float(step["loss_amp"]), loss)
        for p in step["params"]:
            self.assertEqual(p["sha256_amp"], updated[False][p["name"]], p["name"])

    def test_refused_without_fp8_rowwise(self):
        for cmd in (("train", "--data", self.data, "--steps", 1, "--loss", "ce"),
                    ("replay", "--checkpoint", self.path, "--batch", self.data)):
            rc, _, err = run_cli(cmd[0], "--model", self.path, *cmd[1:], "--precision", "fp8", "--rowwise-gw-hp",
                                 "--no-db")
            self.assertEqual(rc, 2, err)
            self.assertIn("--rowwise-gw-hp", err)


if __name__ == "__main__":
    unittest.main()
