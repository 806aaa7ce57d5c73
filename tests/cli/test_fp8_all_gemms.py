# SPDX-License-Identifier: MIT
"""run --fp8-all-gemms (issue 30): the FP8 passes also quantize the model's own matrix products
(aten::addmm, mm, bmm, baddbmm outside linear layers), each operand as the recipe quantizes a
linear layer's: the left one as its input (along K), the right one transposed as its weight
[N, K]; the FP32 product cast to BF16, a Conv1D's bias added as the recipe adds a linear's.

The oracle is written here on torchao 0.18's own quantizers (hp_tensor_to_float8_dynamic for
tensorwise and rowwise, MXTensor.to_mx, NVFP4Tensor.to_nvfp4), each product replaced by an oracle
module, the linear layer converted by torchao as in test_fp8.py: the outputs are the oracle's
bitwise for every recipe on TorchScript and torch.export programs with a Conv1D (addmm), two bmm
(attention) and an mm. A Conv1D quantized so equals torchao's Float8Linear of the same weight, and
without the flag the products stay in BF16 (the outputs differ from the oracle's). Convolutions are
quantized in fp8 and fp8-delayed (one scale per tensor) and left in BF16 by the other recipes
(Convolutions); with --fp8-real-gemm the 2-D products run as torch._scaled_mm (RealProducts)."""
import copy
import dataclasses
import json
import os
import sys
import tempfile
import types
import unittest
import warnings

import numpy as np
import torch

from common import as_float, pass_of, run_cli, run_json

warnings.filterwarnings("ignore")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402
from torchao.float8.config import ScalingGranularity  # noqa: E402
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic  # noqa: E402
from torchao.float8.float8_training_tensor import LinearMMConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fp8_delayed_train import E4M3, TeDelayed  # noqa: E402
from test_fp8 import BlockScaledLinear, bits_equal, mx_quant, nvfp4_quant, run_outputs, save_program  # noqa: E402


class Conv1D(torch.nn.Module):
    """transformers' Conv1D: weight [in, out], torch.addmm(bias, x, weight)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.2)
        self.bias = torch.nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(1),)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class Attention(torch.nn.Module):
    """Two batched products of activations (scores and values)."""

    def forward(self, a):
        s = torch.bmm(a, a.transpose(1, 2)) * 0.25
        return torch.bmm(torch.softmax(s, -1), a)


class Mix(torch.nn.Module):
    """A weight through torch.mm, no bias."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 32) * 0.2)

    def forward(self, x):
        return torch.mm(x, self.weight)


class Products(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = Conv1D(64, 32)
        self.attn = Attention()
        self.mix = Mix()
        self.fc = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = self.proj(x)
        a = self.attn(h.view(-1, 32, 32))  # every K a multiple of 32, as torchao's MX blocks require
        return self.fc(self.mix(a.reshape(-1, 64)))


def products_model():
    torch.manual_seed(4)
    return Products().eval()


def quantizer(recipe):
    """t [.., K] quantize-dequantized along K as `recipe` quantizes a linear's operand (FP32)."""
    if recipe in ("fp8", "fp8-rowwise"):
        rowwise = recipe == "fp8-rowwise"

        def q(t):
            f = hp_tensor_to_float8_dynamic(
                t, torch.float8_e4m3fn, LinearMMConfig(),
                scaling_granularity=ScalingGranularity.AXISWISE if rowwise else ScalingGranularity.TENSORWISE,
                axiswise_dim=-1 if rowwise else None, round_scales_to_power_of_2=rowwise)
            return f._data.float() / f._scale  # torchao's emulated GEMM's operand
        return q
    quant = mx_quant if recipe == "mxfp8" else nvfp4_quant
    return lambda t: quant(t.float().reshape(-1, t.shape[-1]).contiguous()).dequantize(torch.float32).reshape(t.shape)


def product(recipe, a, b, bias=None):
    """a @ b as the pass quantizes it: a along K, b^T along K, the FP32 product cast to BF16; a
    bias added as the recipe adds a linear's (tensorwise and rowwise: in BF16 after the cast;
    block-scaled: inside the FP32 addmm)."""
    q = quantizer(recipe)
    with torch.autocast("cpu", enabled=False):
        aq, wq = q(a), q(b.transpose(-1, -2).contiguous())
        bq = wq.transpose(-1, -2)
        if a.dim() == 3:
            return torch.bmm(aq, bq).to(torch.bfloat16)
        if bias is not None and recipe in ("mxfp8", "nvfp4"):
            return torch.addmm(bias.float(), aq, bq).to(torch.bfloat16)
        out = torch.mm(aq, bq).to(torch.bfloat16)
        return out + bias.to(torch.bfloat16) if bias is not None else out


class OracleConv1D(torch.nn.Module):
    def __init__(self, m, recipe):
        super().__init__()
        self.m, self.recipe = m, recipe

    def forward(self, x):
        size_out = x.size()[:-1] + (self.m.weight.size(1),)
        return product(self.recipe, x.view(-1, x.size(-1)), self.m.weight, self.m.bias).view(size_out)


class OracleAttention(torch.nn.Module):
    def __init__(self, recipe):
        super().__init__()
        self.recipe = recipe

    def forward(self, a):
        s = product(self.recipe, a, a.transpose(1, 2)) * 0.25
        return product(self.recipe, torch.softmax(s, -1), a)


class OracleMix(torch.nn.Module):
    def __init__(self, m, recipe):
        super().__init__()
        self.m, self.recipe = m, recipe

    def forward(self, x):
        return product(self.recipe, x, self.m.weight)


def oracle(model, x, recipe):
    """The model with every product quantized as the recipe's linears, fc as torchao converts it."""
    m = copy.deepcopy(model)
    m.proj, m.attn, m.mix = OracleConv1D(m.proj, recipe), OracleAttention(recipe), OracleMix(m.mix, recipe)
    if recipe == "fp8":
        m = convert_to_float8_training(m, config=Float8LinearConfig(emulate=True))
    elif recipe == "fp8-rowwise":
        cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
        m = convert_to_float8_training(m, config=cfg)
    else:
        m.fc = BlockScaledLinear(m.fc, mx_quant if recipe == "mxfp8" else nvfp4_quant)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return m(x).float().numpy()


RECIPES = ["fp8", "fp8-rowwise", "mxfp8", "nvfp4"]


class Fp8AllGemms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = products_model()
        g = torch.Generator().manual_seed(9)
        cls.x = torch.randn(16, 32, generator=g) * 2
        save_program(cls, d)
        cls.db = os.path.join(d, "runs.sqlite")
        cls.want = {r: oracle(cls.model, cls.x, r) for r in RECIPES}
        base = ("run", "--probes", cls.probes, "--batch-size", len(cls.x), "--outputs", "--allow-nonfinite")
        cls.results = {fmt: run_json(*base, "--model", path, "--precision", ",".join(RECIPES), "--fp8-all-gemms",
                                     "--db", cls.db)[1] for fmt, path in cls.paths.items()}
        cls.linears_only = run_json(*base, "--model", cls.paths["export"], "--precision", ",".join(RECIPES),
                                    "--no-db")[1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_outputs_bitwise_as_the_oracle(self):
        for fmt, result in self.results.items():
            self.assertTrue(result["fp8_all_gemms"])
            for r in RECIPES:
                got, want = run_outputs(result, r), self.want[r]
                self.assertTrue(bits_equal(got, want), f"{fmt} {r}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_without_the_flag_the_products_stay_bf16(self):
        self.assertNotIn("fp8_all_gemms", self.linears_only)
        for r in RECIPES:
            self.assertFalse(bits_equal(run_outputs(self.linears_only, r), self.want[r]), r)
            ops = {(o["module"], o["op"]) for o in pass_of(self.linears_only, r)["fp8_operands"]}
            self.assertEqual(ops, {("fc", "aten::linear")}, r)
        self.assertIn("matrix products of the model ran unquantized", " ".join(self.linears_only["warnings"]))
        self.assertNotIn("ran unquantized", " ".join(self.results["export"]["warnings"]))

    def test_every_product_names_its_operands(self):
        for fmt, result in self.results.items():
            for r in RECIPES:
                got = sorted((o["module"], o["op"], o["operand"]) for o in pass_of(result, r)["fp8_operands"])
                self.assertEqual(got, sorted([("proj", "aten::addmm", "mat1"), ("proj", "aten::addmm", "mat2"),
                                              ("attn", "aten::bmm", "mat1"), ("attn", "aten::bmm", "mat2"),
                                              ("mix", "aten::mm", "mat1"), ("mix", "aten::mm", "mat2"),
                                              ("fc", "aten::linear", "input"), ("fc", "aten::linear", "weight")]),
                                 f"{fmt} {r}")
                mix = {o["operand"]: o for o in pass_of(result, r)["fp8_operands"] if o["module"] == "mix"}
                self.assertEqual(mix["mat2"]["elements"], 64 * 32, f"{fmt} {r}")  # the weight, once a batch

    def test_a_conv1d_quantized_as_torchaos_float8_linear(self):
        """The oracle's product is torchao's: the Conv1D as an nn.Linear of the same weight, converted."""
        m = copy.deepcopy(self.model)
        lin = torch.nn.Linear(32, 64)
        with torch.no_grad():
            lin.weight.copy_(m.proj.weight.t())
            lin.bias.copy_(m.proj.bias)
        m.proj = lin
        m.attn, m.mix = OracleAttention("fp8"), OracleMix(m.mix, "fp8")
        m = convert_to_float8_training(m, config=Float8LinearConfig(emulate=True))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            as_linear = m(self.x).float().numpy()
        self.assertTrue(bits_equal(as_linear, self.want["fp8"]))
        self.assertTrue(bits_equal(run_outputs(self.results["export"], "fp8"), as_linear))

    def test_stored_and_shown(self):
        rid = self.results["export"]["run_id"]
        rc, out, err = run_cli("show", rid, "--db", self.db, "--json", check_rc=0)
        shown = json.loads(out)
        self.assertTrue(shown["fp8_all_gemms"])
        self.assertEqual(sorted((o["module"], o["op"], o["operand"]) for o in pass_of(shown, "fp8")["fp8_operands"]),
                         sorted((o["module"], o["op"], o["operand"])
                                for o in pass_of(self.results["export"], "fp8")["fp8_operands"]))
        rc, out, err = run_cli("show", rid, "--db", self.db, "--layers", check_rc=0)
        self.assertIn("all matrix products quantized", out)
        # the operand table names a product's operands with their op, as the GUI's chart does
        second = lambda module: {line.split()[1] for line in out.splitlines() if line.startswith(f"    {module} ")}
        self.assertIn("bmm.mat1", second("attn"), out)
        self.assertIn("input", second("fc"), out)  # a linear's, as before

    def test_the_what_if_pass_says_what_it_counts(self):
        rc, out, err = run_cli("run", "--model", self.paths["export"], "--probes", self.probes, "--batch-size",
                               len(self.x), "--precision", "bf16", "--fp8-what-if", "--fp8-all-gemms", "--no-db")
        self.assertIn(rc, (0, 1), err)
        self.assertIn("(the what-if counts every matrix product, not only linear layers)", out)
        self.assertNotIn("all matrix products quantized", out)

    def test_what_if_counts_the_products(self):
        rc, r = run_json("run", "--model", self.paths["export"], "--probes", self.probes, "--batch-size",
                         len(self.x), "--precision", "bf16", "--fp8-what-if", "--fp8-all-gemms", "--no-db")
        entries = {(o["recipe"], o["module"], o["op"], o["operand"]) for o in pass_of(r, "bf16")["fp8_what_if"]}
        for recipe in RECIPES:
            for mod, op in (("proj", "aten::addmm"), ("attn", "aten::bmm"), ("mix", "aten::mm"),
                            ("fc", "aten::linear")):
                for operand in (("input", "weight") if op == "aten::linear" else ("mat1", "mat2")):
                    self.assertIn((recipe, mod, op, operand), entries)
        self.assertEqual(len(entries), 4 * 8)

    def test_advice_counts_the_products(self):
        """The advisor's share left in BF16 is of every quantized GEMM (5 here: proj's addmm, attn's
        two bmm, mix's mm, fc's linear), not of the one linear; its snippet says the products were
        quantized. A recorded run's setting cannot be changed by the flag."""
        with tempfile.TemporaryDirectory() as d:
            out, py = os.path.join(d, "advice.json"), os.path.join(d, "advice.py")
            run_cli("advise", "--model", self.paths["export"], "--probes", self.probes, "--batch-size", len(self.x),
                    "--precision", "fp8", "--fp8-all-gemms", "--max-flips", 1, "--atol", 0.5, "--no-db", "--no-bench",
                    "--json", out, "--python", py, "-q", check_rc=0)
            with open(out) as f:
                advice = json.load(f)
            with open(py) as f:
                snippet = f.read()
        self.assertEqual(advice["outcome"], "found")
        self.assertTrue(advice["keep_bf16"])
        quantized = {"proj": 1, "attn": 2, "mix": 1, "fc": 1}
        self.assertAlmostEqual(advice["fp32_share"]["ops"], sum(quantized[k] for k in advice["keep_bf16"]) / 5)
        self.assertIn("--fp8-all-gemms", snippet)
        rc, out, err = run_cli("advise", self.results["export"]["run_id"], "--db", self.db, "--fp8-all-gemms", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("--fp8-all-gemms", err)

    def test_a_bf16_glob_that_keeps_nothing_is_named(self):
        """--keep-bf16 attn keeps nothing out of FP8 when only linear layers are quantized (attn runs
        two bmm): the run says so; with --fp8-all-gemms it keeps attn's products, and fc always."""
        def warned(*extra):
            got = run_json("run", "--model", self.paths["export"], "--probes", self.probes, "--batch-size",
                           len(self.x), "--precision", "bf16,fp8,mxfp8", "--no-db", *extra)[1]
            return [w for w in got["warnings"] if "left no GEMM out of FP8" in w]
        w = warned("--keep-bf16", "attn", "--keep-bf16", "fc")
        self.assertEqual(len(w), 1, w)
        self.assertIn("fp8: kept in BF16 'attn' (keep_bf16[0]) but left no GEMM out of FP8", w[0])
        self.assertIn("--fp8-all-gemms", w[0])
        self.assertEqual(warned("--keep-bf16", "attn", "--fp8-all-gemms"), [])
        self.assertEqual(warned("--keep-bf16", "fc"), [])

    def test_refused_without_an_fp8_pass(self):
        rc, out, err = run_cli("run", "--model", self.paths["export"], "--probes", self.probes, "--precision", "bf16",
                               "--fp8-all-gemms", "--no-db", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("--fp8-all-gemms", err)
        self.assertIn("no FP8 pass", err)


class MatmulAttention(torch.nn.Module):
    """Products written with torch.matmul, as most attention code is: a 4-D activation through a
    weight (folded to an mm), scores and values of 4-D tensors (bmm over the flattened batch),
    and a float64 product autocast leaves alone."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(32, 32) * 0.2)
        self.d = torch.nn.Parameter(torch.randn(32, 32) * 0.2)
        self.fc = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = torch.matmul(x.view(-1, 2, 4, 32), self.w)
        s = torch.matmul(h, h.transpose(-1, -2)) * 0.1
        o = torch.matmul(torch.softmax(s, -1), h).reshape(x.shape[0], 32)
        return self.fc(o + torch.mm(o.double(), self.d.double()).float())


class OracleMatmulAttention(torch.nn.Module):
    def __init__(self, m, recipe):
        super().__init__()
        self.m, self.recipe = m, recipe

    def matmul(self, a, b):
        if b.dim() == 2:  # folded: [.., K] @ [K, N] as one mm
            return product(self.recipe, a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
        out = product(self.recipe, a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:]))
        return out.reshape(*a.shape[:-1], b.shape[-1])

    def forward(self, x):
        h = self.matmul(x.view(-1, 2, 4, 32), self.m.w)
        s = self.matmul(h, h.transpose(-1, -2)) * 0.1
        o = self.matmul(torch.softmax(s, -1), h).reshape(x.shape[0], 32)
        return o + torch.mm(o.double(), self.m.d.double()).float()


class Matmuls(unittest.TestCase):
    """torch.matmul's products are quantized as the mm / bmm it reduces to (autocast's matmul would
    run them with autocast off, out of the pass's reach); a float64 product is left alone."""

    def test_matmul_products_quantized(self):
        torch.manual_seed(6)
        model = MatmulAttention().eval()
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(9)) * 2
        p = types.SimpleNamespace(model=model, x=x)
        with tempfile.TemporaryDirectory() as d:
            save_program(p, d)
            for fmt, path in p.paths.items():
                got = run_json("run", "--model", path, "--probes", p.probes, "--precision", "fp8,fp8-rowwise",
                               "--batch-size", len(x), "--outputs", "--fp8-all-gemms", "--no-db")[1]
                for recipe in ("fp8", "fp8-rowwise"):
                    m = copy.deepcopy(model)
                    body = OracleMatmulAttention(m, recipe)
                    cfg = (Float8LinearConfig(emulate=True) if recipe == "fp8" else
                           dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=True))
                    head = convert_to_float8_training(torch.nn.Sequential(m.fc), config=cfg)
                    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                        want = head(body(x)).float().numpy()
                    out = run_outputs(got, recipe)
                    self.assertTrue(bits_equal(out, want), f"{fmt} {recipe}: max |diff| {np.nanmax(np.abs(out - want))}")
                    ops = sorted({o["op"] for o in pass_of(got, recipe)["fp8_operands"]})
                    self.assertEqual(ops, ["aten::bmm", "aten::linear", "aten::mm"], f"{fmt} {recipe}")


class WideProducts(torch.nn.Module):
    """A wide Conv1D (768 -> 4096, an addmm with a bias) and a GELU, then a bmm: on this CPU some of
    the Conv1D's scores round to another BF16 value when torch._scaled_mm multiplies the scales
    into the FP8 product than when the emulation divides each operand first."""

    def __init__(self):
        super().__init__()
        self.proj = Conv1D(4096, 768)
        self.attn = Attention()

    def forward(self, x):
        h = torch.nn.functional.gelu(self.proj(x))
        return self.attn(h.view(-1, 64, 64)).reshape(-1, 4096)


class RealProducts(unittest.TestCase):
    """--fp8-real-gemm with --fp8-all-gemms: the 2-D products (a Conv1D's addmm) run as real FP8
    GEMMs too, as torchao's Float8Linear without emulate runs a linear of the same weight; the
    batched ones (bmm) stay emulated, and the check says how many."""

    def test_conv1d_real_bmm_emulated(self):
        torch.manual_seed(4)
        model = WideProducts().eval()
        x = torch.randn(128, 768, generator=torch.Generator().manual_seed(9)) * 3

        def with_conv1d_as(linear_emulate):
            m = copy.deepcopy(model)
            lin = torch.nn.Linear(768, 4096)
            with torch.no_grad():
                lin.weight.copy_(model.proj.weight.t())
                lin.bias.copy_(model.proj.bias)
            cfg = Float8LinearConfig(emulate=linear_emulate)
            m.proj, m.attn = convert_to_float8_training(torch.nn.Sequential(lin), config=cfg), OracleAttention("fp8")
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                return m(x).float().numpy()

        real, sim = with_conv1d_as(False), with_conv1d_as(True)
        self.assertFalse(bits_equal(real, sim), "the oracle should tell the real Conv1D from the emulated one")
        with tempfile.TemporaryDirectory() as d:
            p = types.SimpleNamespace(model=model, x=x)
            save_program(p, d)
            got = run_json("run", "--model", p.paths["export"], "--probes", p.probes, "--precision", "fp8", "--batch-size", 128,
                           "--outputs", "--fp8-all-gemms", "--fp8-real-gemm", "on", "--no-db")[1]
        fp8 = pass_of(got, "fp8")
        self.assertTrue(bits_equal(run_outputs(got, "fp8"), sim), "the pass itself stays simulated")
        g = fp8["real_gemm"]
        self.assertTrue(g["ran"], g)
        out = np.array([[as_float(v) for v in r] for r in g["outputs"]], dtype=np.float32)
        self.assertTrue(bits_equal(out, real), f"max |diff| {np.nanmax(np.abs(out - real))}")
        self.assertIn("2 of 3 matrix products emulated (batched", g["kernel"])


class Cnn(torch.nn.Module):
    """Convolutions of both conv2d overloads (numbers and a string padding), a Conv1d, a BatchNorm
    with running statistics, and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding="same", bias=False)
        self.seq = torch.nn.Conv1d(32, 32, 3)
        self.fc = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv1(x)))
        h = self.conv2(h).mean(-1)  # [N, 32, H]
        return self.fc(self.seq(h).mean(-1))


class OracleConv(torch.nn.Module):
    """The convolution as a pass of all GEMMs runs it in fp8 and fp8-delayed: input and weight
    quantize-dequantized by q(t, operand) with one scale each, the convolution in FP32 without the
    bias, cast to BF16, + the bias in BF16."""

    def __init__(self, conv, q):
        super().__init__()
        self.conv, self.q = conv, q

    def forward(self, x):
        c = self.conv
        with torch.autocast("cpu", enabled=False):
            out = c._conv_forward(self.q(x, "input"), self.q(c.weight, "weight"), None).to(torch.bfloat16)
        return out if c.bias is None else out + c.bias.to(torch.bfloat16).view(-1, *([1] * (out.dim() - 2)))


class OracleLinear(torch.nn.Module):
    """fp8-delayed's linear (test_fp8.DelayedLinear's GEMM) with the operands cast by q."""

    def __init__(self, lin, q):
        super().__init__()
        self.lin, self.q = lin, q

    def forward(self, x):
        xq, wq = self.q(x, "input"), self.q(self.lin.weight, "weight")
        with torch.autocast("cpu", enabled=False):
            out = torch.mm(xq.reshape(-1, xq.shape[-1]), wq.t()).to(torch.bfloat16)
        return out.reshape(*x.shape[:-1], -1) + self.lin.bias.to(torch.bfloat16)


CONVS = {"conv1": "aten::conv2d", "conv2": "aten::conv2d", "seq": "aten::conv1d"}


class Convolutions(unittest.TestCase):
    """--fp8-all-gemms quantizes convolutions in the recipes of per-tensor scales (fp8, and
    fp8-delayed with one delayed scaling per operand, Transformer Engine's rule written in
    test_fp8_delayed_train.TeDelayed), as the oracle above; the recipes of finer scales leave them
    in BF16 and say so."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(5)
        cls.model = Cnn().eval()
        with torch.no_grad():
            cls.model.bn.running_mean.uniform_(-0.5, 0.5)
            cls.model.bn.running_var.uniform_(0.5, 2.0)
        cls.x = torch.randn(12, 3, 8, 8, generator=torch.Generator().manual_seed(9)) * 3
        for b in range(3):
            cls.x[4 * b:4 * b + 4] *= 4.0 ** b * 40  # every batch after the first outruns its stale scale
        save_program(cls, cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def oracle(self, q, linear, batch):
        m = copy.deepcopy(self.model)
        for name in CONVS:
            setattr(m, name, OracleConv(getattr(m, name), (lambda n: lambda t, k: q(t, f"{n}/{k}"))(name)))
        m.fc = linear(m.fc)
        outs = []
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            for b in range(0, len(self.x), batch):
                outs.append(m(self.x[b:b + batch]).float())
                yield torch.cat(outs).numpy() if b + batch >= len(self.x) else None

    def run_conv(self, fmt, precision, batch, *extra):
        return run_json("run", "--model", self.paths[fmt], "--probes", self.probes, "--precision", precision,
                        "--batch-size", batch, "--outputs", "--fp8-all-gemms", "--allow-nonfinite", "--no-db",
                        *extra)[1]

    def test_tensorwise_bitwise(self):
        fp8 = quantizer("fp8")
        convert = lambda fc: convert_to_float8_training(torch.nn.Sequential(fc), config=Float8LinearConfig(emulate=True))
        *_, want = self.oracle(lambda t, _: fp8(t), convert, len(self.x))
        for fmt in self.paths:
            got = self.run_conv(fmt, "fp8", len(self.x))
            self.assertTrue(bits_equal(run_outputs(got, "fp8"), want),
                            f"{fmt}: max |diff| {np.nanmax(np.abs(run_outputs(got, 'fp8') - want))}")
            ops = sorted((o["module"], o["op"], o["operand"]) for o in pass_of(got, "fp8")["fp8_operands"])
            self.assertEqual(ops, sorted([(n, op, k) for n, op in CONVS.items() for k in ("input", "weight")] +
                                         [("fc", "aten::linear", "input"), ("fc", "aten::linear", "weight")]), fmt)
            self.assertFalse(any("convolution" in w for w in got["warnings"]), got["warnings"])
        without = run_json("run", "--model", self.paths["export"], "--probes", self.probes, "--precision", "fp8",
                           "--batch-size", len(self.x), "--outputs", "--allow-nonfinite", "--no-db")[1]
        self.assertFalse(bits_equal(run_outputs(without, "fp8"), want), "without the flag the convolutions stay BF16")

    def test_decomposed_program_quantizes_aten_convolution(self):
        """A core-ATen program (run_decompositions()) has aten.convolution for every convolution and
        addmm for the linear: each quantized as the undecomposed program's, no convolution left in BF16
        (was: aten.convolution ran unquantized, without a warning, while the run said it quantized them)."""
        path = os.path.join(self.tmp.name, "decomposed.pt2")
        torch.export.save(torch.export.export(self.model, (self.x,)).run_decompositions(), path)
        got = run_json("run", "--model", path, "--probes", self.probes, "--precision", "fp8", "--batch-size",
                       len(self.x), "--outputs", "--fp8-all-gemms", "--allow-nonfinite", "--no-db")[1]
        ops = sorted((o["module"], o["op"], o["operand"]) for o in pass_of(got, "fp8")["fp8_operands"])
        self.assertEqual(ops, sorted([(n, "aten::convolution", k) for n in CONVS for k in ("input", "weight")] +
                                     [("fc", "aten::addmm", "mat1"), ("fc", "aten::addmm", "mat2")]))
        self.assertFalse(any("unquantized" in w for w in got["warnings"]), got["warnings"])
        undecomposed = self.run_conv("export", "fp8", len(self.x))
        # the same weights and first input, quantized alike (the later inputs differ: CPU autocast leaves
        # aten::convolution in FP32, where eager's conv2d gives BF16, and so the quantized one does)
        for o in pass_of(got, "fp8")["fp8_operands"]:
            if o["op"] == "aten::convolution" and (o["operand"] == "weight" or o["module"] == "conv1"):
                same = [u for u in pass_of(undecomposed, "fp8")["fp8_operands"]
                        if u["module"] == o["module"] and u["operand"] == o["operand"]]
                self.assertEqual((o["amax"], o["scale_min"], o["underflow"]),
                                 (same[0]["amax"], same[0]["scale_min"], same[0]["underflow"]), o["module"])

    def test_decomposed_convolution_beside_unquantized_ones(self):
        """CPU autocast does not cast aten::convolution: a decomposed program's convolutions run in FP32.
        A quantized one gives its result in FP32 too, so the unquantized convolution after it (a
        transposed one, one kept in BF16) gets operands of one dtype (was: a BF16 input beside an FP32
        weight, exit 3, in run, train and advise)."""
        torch.manual_seed(4)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.ConvTranspose2d(8, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 3, padding=1),
                                  torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 5)).eval()
        path = os.path.join(self.tmp.name, "tconv-decomposed.pt2")
        x = self.x[:8]
        torch.export.save(torch.export.export(net, (x,)).run_decompositions(), path)
        probes = os.path.join(self.tmp.name, "tconv-probes.pt")
        torch.save({"inputs": x, "labels": torch.arange(8) % 5}, probes)
        base = ("--model", path, "--probes", probes, "--batch-size", 4, "--fp8-all-gemms", "--no-db", "-q")
        for extra in ((), ("--keep-bf16", "3")):
            rc, _, err = run_cli("run", *base, "--precision", "fp8,fp8-delayed", "--max-flips", 8, *extra)
            self.assertIn(rc, (0, 1), (extra, err))
        got = run_json("run", *base[:-1], "--precision", "fp8", "--max-flips", 8)[1]
        convs = {o["module"] for o in pass_of(got, "fp8")["fp8_operands"] if o["op"] == "aten::convolution"}
        self.assertEqual(convs, {"0", "3"}, "the transposed convolution stays unquantized")
        # and the run says so, counting its calls (one batch: the program's static batch of 8; was: silently)
        self.assertTrue(any("fp8: 1 transposed convolution calls ran unquantized under autocast" in w
                            for w in got["warnings"]), got["warnings"])
        rc, _, err = run_cli("train", "--model", path, "--data", probes, "--steps", 2, "--batch-size", 8, "--precision",
                             "fp8-delayed", "--fp8-all-gemms", "--no-scaler", "--loss", "ce", "--no-db", "-q")
        self.assertIn(rc, (0, 1), err)

    def test_delayed_per_operand_history(self):
        te = TeDelayed(history=2, margin=0)
        q = lambda t, name: te.cast(t, name, E4M3)
        want = None
        for out in self.oracle(q, lambda fc: OracleLinear(fc, lambda t, k: q(t, f"fc/{k}")), 4):
            te.update()
            want = out if out is not None else want
        got = self.run_conv("torchscript", "fp8-delayed", 4, "--fp8-amax-history", 2)
        self.assertTrue(bits_equal(run_outputs(got, "fp8-delayed"), want),
                        f"max |diff| {np.nanmax(np.abs(run_outputs(got, 'fp8-delayed') - want))}")
        sat = {o["module"] + "/" + o["operand"]: o["saturated"] for o in pass_of(got, "fp8-delayed")["fp8_operands"]}
        self.assertGreater(sat["conv1/input"], 0, "the growing input outruns conv1's stale scale")

    def test_finer_recipes_leave_them_in_bf16(self):
        got = self.run_conv("export", "fp8,mxfp8", len(self.x))
        mx = pass_of(got, "mxfp8")
        self.assertEqual({o["module"] for o in mx["fp8_operands"]}, {"fc"})
        warn = [w for w in got["warnings"] if "convolution" in w]
        self.assertEqual(len(warn), 1, got["warnings"])
        self.assertIn("mxfp8: 3 convolution calls ran unquantized under autocast (BF16", warn[0])
        plain = run_json("run", "--model", self.paths["export"], "--probes", self.probes, "--precision", "mxfp8",
                         "--batch-size", len(self.x), "--outputs", "--allow-nonfinite", "--no-db")[1]
        self.assertTrue(bits_equal(run_outputs(got, "mxfp8"), run_outputs(plain, "mxfp8")))

    def test_advice_counts_the_convolutions(self):
        """fp32_share is of the four quantized GEMMs (three convolutions and the linear)."""
        rc, out, err = run_cli("advise", "--model", self.paths["export"], "--probes", self.probes, "--batch-size",
                               len(self.x), "--precision", "fp8", "--fp8-all-gemms", "--max-flips", 0, "--atol", 2,
                               "--no-db", "--no-bench", "--json", "-", "-q")
        self.assertEqual(rc, 0, err)
        advice = json.loads(out)
        self.assertEqual(advice["outcome"], "found")
        self.assertTrue(set(advice["keep_bf16"]) & set(CONVS), advice["keep_bf16"])
        self.assertAlmostEqual(advice["fp32_share"]["ops"], len(set(advice["keep_bf16"]) & {*CONVS, "fc"}) / 4)

    def test_what_if_and_real_gemm(self):
        got = self.run_conv("export", "bf16,fp8", len(self.x), "--fp8-what-if", "--fp8-real-gemm", "on")
        entries = {(o["recipe"], o["module"], o["operand"]) for o in pass_of(got, "bf16")["fp8_what_if"]
                   if o["module"] in CONVS}
        self.assertEqual(entries, {("fp8", n, k) for n in CONVS for k in ("input", "weight")})
        self.assertIn("3 of 3 matrix products emulated", pass_of(got, "fp8")["real_gemm"]["kernel"])


if __name__ == "__main__":
    unittest.main()
