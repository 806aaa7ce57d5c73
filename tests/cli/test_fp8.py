# SPDX-License-Identifier: MIT
"""The simulated FP8 pass (`run --precision fp8`, issue 30) against torchao 0.18: the same model
converted with torchao.float8.convert_to_float8_training(Float8LinearConfig(emulate=True)) and run
under torch.autocast("cpu", torch.bfloat16) gives the FP8 pass's outputs bitwise, for TorchScript
and torch.export programs; with --keep-fp32 fc2, torchao leaves fc2 unconverted and it runs as an
FP32 region does (autocast off, input cast to FP32). Decisions and flips are Python's. The other
recipes (`fp8-rowwise`, `mxfp8`, `nvfp4`) against torchao too: Float8LinearConfig.from_recipe_name
("rowwise") with emulate=True, and MXTensor / NVFP4Tensor operands through torchao's emulated
GEMM (addmm on the dequantized FP32 operands), cast to BF16; `fp8-delayed` against Transformer
Engine's delayed-scaling rule written here (DelayedLinear), with inputs that outgrow the stale scale. Commands that do not simulate FP8 yet
refuse every FP8 name, and a stored training with one is refused on reading, naming the field."""
import copy
import dataclasses
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, ce_step, comparison_of, near_tie_mlp, pass_of, run_cli, run_json, small_mlp

warnings.filterwarnings("ignore")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402
from torchao.float8.float8_training_tensor import LinearMMConfig, hp_tensor_and_scale_to_float8  # noqa: E402
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.mx_tensor import MXTensor  # noqa: E402
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
import fp8_oracle  # noqa: E402  (torchao's quantizers and the statistics of their outputs)


class Fp32Region(torch.nn.Module):
    """What ampscope's FP32 region does to a module: autocast off, floating inputs cast to FP32."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return self.m(x.float())


def torchao_fp8(model, x, keep=(), fp32=True):
    """torchao's FP8 model; the modules in `keep` left unconverted (module_filter_fn), in an FP32
    region when `fp32`, else as they are: BF16 under autocast (ampscope's --keep-bf16)."""
    m = convert_to_float8_training(copy.deepcopy(model), config=Float8LinearConfig(emulate=True),
                                   module_filter_fn=lambda mod, fqn: fqn not in keep)
    for name in keep if fp32 else ():
        setattr(m, name, Fp32Region(getattr(m, name)))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return m(x).float().numpy()


def torchao_operands(model, x):
    """Each Float8Linear's input (as torchao's module receives it under CPU autocast) and weight,
    quantized by torchao (tensorwise E4M3) and counted as fp8_oracle counts them."""
    m = convert_to_float8_training(copy.deepcopy(model), config=Float8LinearConfig(emulate=True))
    seen = {}
    for name, mod in m.named_modules():
        if type(mod).__name__ == "Float8Linear":
            mod.register_forward_pre_hook(lambda mod, args, name=name: seen.setdefault(name, args[0].detach()))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        m(x)
    spec = {"scheme": "tensorwise", "element": "e4m3", "axis": -1}
    out = {}
    for name, inp in seen.items():
        out[(name, "input")] = fp8_oracle.run_case(inp, spec)
        out[(name, "weight")] = fp8_oracle.run_case(dict(m.named_modules())[name].weight.detach(), spec)
    return out


def bits_equal(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def planted_mlp():
    """near_tie_mlp (seed 0) and 40 probes with one large input: fc1's E4M3 scale is set by it,
    the rest of its input loses precision."""
    torch.manual_seed(0)
    model = near_tie_mlp().eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 16, generator=g) * 3
    x[0, 0] = 200.0
    return model, x


def run_outputs(result, precision):
    """The run JSON's scores of a pass (--outputs) as float32."""
    return np.array([[as_float(v) for v in row] for row in pass_of(result, precision)["outputs"]], dtype=np.float32)


class Fp8Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model, cls.x = planted_mlp()
        cls.paths = {"torchscript": os.path.join(d, "mlp.pt"), "export": os.path.join(d, "mlp.pt2")}
        torch.jit.script(cls.model).save(cls.paths["torchscript"])
        torch.export.save(torch.export.export(cls.model, (cls.x,)), cls.paths["export"])
        with torch.no_grad():
            cls.ref = cls.model(cls.x).numpy()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                cls.bf16 = cls.model(cls.x).float().numpy()
        cls.probes = os.path.join(d, "probes.pt")
        torch.save({"inputs": cls.x, "labels": torch.from_numpy(cls.ref.argmax(1)), "ids": [f"p{i}" for i in range(len(cls.x))]},
                   cls.probes)
        cls.want = torchao_fp8(cls.model, cls.x)
        cls.want_keep = torchao_fp8(cls.model, cls.x, keep=("fc2",))
        cls.results = {}
        for fmt, path in cls.paths.items():
            cls.results[fmt] = run_json("run", "--model", path, "--probes", cls.probes, "--precision", "bf16,fp8",
                                        "--batch-size", len(cls.x), "--outputs", "--no-db")[1]
        cls.keep = run_json("run", "--model", cls.paths["export"], "--probes", cls.probes, "--precision", "fp8",
                            "--keep-fp32", "fc2", "--batch-size", len(cls.x), "--outputs", "--no-db")[1]
        cls.want_bf16 = torchao_fp8(cls.model, cls.x, keep=("fc2",), fp32=False)
        cls.db = os.path.join(d, "runs.sqlite")
        cls.keep_bf16 = {  # the export interpreter observed and recorded; TorchScript uninstrumented (--no-inspect)
            "export": run_json("run", "--model", cls.paths["export"], "--probes", cls.probes, "--precision", "fp8",
                               "--keep-bf16", "fc2", "--batch-size", len(cls.x), "--outputs", "--db", cls.db)[1],
            "torchscript": run_json("run", "--model", cls.paths["torchscript"], "--probes", cls.probes, "--precision",
                                    "bf16,fp8", "--keep-bf16", "fc2", "--batch-size", len(cls.x), "--outputs",
                                    "--no-inspect", "--no-db")[1]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @staticmethod
    def outputs(result, precision):
        return run_outputs(result, precision)

    def test_outputs_bitwise_as_torchao(self):
        self.assertFalse(bits_equal(self.want, self.bf16), "the planted input should make FP8 differ from BF16")
        for fmt, result in self.results.items():
            got = self.outputs(result, "fp8")
            self.assertTrue(bits_equal(got, self.want), f"{fmt}: max |diff| {np.nanmax(np.abs(got - self.want))}")
            self.assertTrue(bits_equal(self.outputs(result, "bf16"), self.bf16), fmt)  # the BF16 pass is untouched

    def test_operand_statistics_as_torchao(self):
        want = torchao_operands(self.model, self.x)
        for fmt, result in self.results.items():
            ops = pass_of(result, "fp8")["fp8_operands"]
            self.assertEqual(sorted((o["module"], o["operand"]) for o in ops), sorted(want), fmt)
            for o in ops:
                w, what = want[(o["module"], o["operand"])], f"{fmt} {o['module']} {o['operand']}"
                self.assertEqual(o["elements"], w["numel"], what)
                for k in ("underflow", "subnormal", "saturated", "nonfinite_out"):
                    self.assertEqual(o[k], w[k], f"{what} {k}")
                self.assertEqual(as_float(o["amax"]), as_float(w["amax"]), what)
                self.assertEqual(as_float(o["scale_min"]), w["scale_min"], what)  # the scale torchao chose, exactly
                self.assertAlmostEqual(as_float(o["sqnr_db"]), w["sqnr_db"], delta=1e-3, msg=what)
        fc1_in = want[("fc1", "input")]  # the planted 200 sets fc1's input scale: its small values go subnormal
        self.assertGreater(fc1_in["subnormal"], 0)

    def test_keep_fp32_module_is_left_out_of_fp8(self):
        got = self.outputs(self.keep, "fp8")
        self.assertTrue(bits_equal(got, self.want_keep), f"max |diff| {np.nanmax(np.abs(got - self.want_keep))}")
        self.assertFalse(bits_equal(self.want_keep, self.want))

    def test_keep_bf16_module_runs_in_bf16_as_torchao_leaves_it(self):
        """--keep-bf16 fc2: torchao's module_filter_fn leaving fc2 out, fc2 then BF16 under autocast."""
        self.assertFalse(bits_equal(self.want_bf16, self.want))
        self.assertFalse(bits_equal(self.want_bf16, self.want_keep))
        for fmt, result in self.keep_bf16.items():
            got = self.outputs(result, "fp8")
            self.assertTrue(bits_equal(got, self.want_bf16), f"{fmt}: max |diff| {np.nanmax(np.abs(got - self.want_bf16))}")
            self.assertEqual(result["keep_bf16"], ["fc2"], fmt)
        self.assertTrue(bits_equal(self.outputs(self.keep_bf16["torchscript"], "bf16"), self.bf16))  # only FP8 passes
        ops = pass_of(self.keep_bf16["export"], "fp8")["fp8_operands"]
        self.assertEqual(sorted((o["module"], o["operand"]) for o in ops), [("fc1", "input"), ("fc1", "weight")])
        self.assertNotIn("keep_bf16", self.results["export"])  # absent when none: the JSON as it was

    def test_keep_bf16_is_stored_and_shown(self):
        uuid = self.keep_bf16["export"]["run_id"]
        shown = json.loads(run_cli("show", uuid, "--json", "--db", self.db, check_rc=0)[1])
        self.assertEqual(shown["keep_bf16"], ["fc2"])
        rc, text, _ = run_cli("show", uuid, "--db", self.db, check_rc=0)
        self.assertIn("pass fp8 (kept in BF16: fc2)", text)

    def test_keep_bf16_refused_by_flag(self):
        base = ("run", "--model", self.paths["export"], "--probes", self.probes, "--no-db")
        for extra, words in ((("--precision", "bf16", "--keep-bf16", "fc2"), ("--keep-bf16: ", "no FP8 pass")),
                             (("--precision", "fp8", "--keep-bf16", "nosuch"), ("--keep-bf16: ", "'nosuch' matches no module")),
                             (("--precision", "fp8", "--keep-bf16", "*"), ("--keep-bf16: ", "whole model in BF16"))):
            rc, _, err = run_cli(*base, *extra)
            self.assertEqual(rc, 2, err)
            for w in words:
                self.assertIn(w, err, extra)

    def test_a_nul_in_a_files_glob_is_refused_not_cut_short(self):
        """A JSON string may hold U+0000: "fc2\\u0000junk" must not match fc2 (the glob read up to the
        NUL) nor cut the message short there; refused naming the file, the NUL made visible."""
        for flag, key, precision in (("--keep-bf16-file", "keep_bf16", "fp8"), ("--keep-fp32-file", "keep_fp32", "fp8")):
            path = os.path.join(self.tmp.name, f"nul-{key}.json")
            with open(path, "w") as f:
                f.write('{"%s": ["fc2\\u0000junk"]}' % key)
            rc, _, err = run_cli("run", "--model", self.paths["export"], "--probes", self.probes, "--no-db",
                                 "--precision", precision, flag, path)
            self.assertEqual(rc, 2, f"{flag}: {err}")
            self.assertIn(path, err)
            self.assertIn("fc2\\x00junk", err, flag)
            self.assertIn("matches no module", err, flag)

    def test_decisions_and_flips_as_python(self):
        ref, amp = self.ref.argmax(1), self.want.argmax(1)
        for fmt, result in self.results.items():
            cmp = comparison_of(result, "fp8")
            self.assertEqual(cmp["amp_decisions"], amp.tolist(), fmt)
            self.assertEqual([f["sample"] for f in cmp["flips"]], [f"p{i}" for i in np.nonzero(ref != amp)[0]], fmt)

    def test_other_commands_refuse_fp8_by_name(self):
        d = self.tmp.name
        for name in FP8_NAMES:
            for args in (("ops", "--model", "demo:mlp"),
                         ("bench", "--model", self.paths["export"], "--probes", self.probes, "--db",
                          os.path.join(d, "b.sqlite"))):
                rc, _, err = run_cli(*args, "--precision", name)
                self.assertEqual(rc, 2, f"{args[0]} {name}: {err}")
                self.assertIn(f"'{name}'", err, args[0])
                self.assertIn(f"{name} is simulated", err, args[0])
        # train runs every recipe (Fp8Train, test_mxfp8_train.py, test_nvfp4_train.py, test_fp8_delayed_train.py)
        rc, _, err = run_cli("train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--no-db", "--precision",
                             "fp4")
        self.assertEqual(rc, 2, err)
        self.assertIn("'fp4'; expected fp16, bf16, fp8, fp8-rowwise, mxfp8, nvfp4 or fp8-delayed", err)

    def test_stored_training_with_an_fp8_precision_is_refused_by_field(self):
        # Was: a stored training whose spec.precision read "mxfp8" (or any word) was shown as fp16.
        db = os.path.join(self.tmp.name, "train.sqlite")
        run_cli("train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--batch-size", "8", "--device", "cpu",
                "-q", "--db", db, check_rc=0)
        con = sqlite3.connect(db)
        try:
            (uuid, header), = con.execute("SELECT uuid, header_json FROM runs WHERE kind='train'").fetchall()
            con.execute("DROP TRIGGER runs_criteria_immutable")
            con.commit()
        finally:
            con.close()
        self.assertEqual(run_cli("show", uuid, "--db", db)[0], 0)

        def store_precision(name):
            h = json.loads(header)
            h["spec"]["precision"] = name
            con = sqlite3.connect(db)
            con.execute("UPDATE runs SET header_json=? WHERE uuid=?", (json.dumps(h), uuid))
            con.commit()
            con.close()

        for name in ["fp32", "fp9"]:  # no training runs in these
            store_precision(name)
            rc, _, err = run_cli("show", uuid, "--db", db)
            self.assertEqual(rc, 2, f"{name}: {err}")
            self.assertIn("spec.precision", err, name)
            self.assertIn(f'"{name}"', err, name)
        for name in FP8_NAMES:  # every FP8 name trains: read back by its name, never as fp16
            store_precision(name)
            rc, out, err = run_cli("show", uuid, "--db", db, "--json")
            self.assertEqual(rc, 0, f"{name}: {err}")
            self.assertEqual(json.loads(out)["precision"], name)
            rc, out, err = run_cli("show", uuid, "--db", db)
            self.assertEqual(rc, 0, f"{name}: {err}")
            self.assertIn(f"policy: {name}", out)


FP8_NAMES = ["fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed"]


def block_mlp():
    """32 -> 64 -> 5 (Linear, GELU, LayerNorm, Linear): every reduction dimension a multiple of 32,
    as torchao's MX and NVFP4 tensors require."""
    torch.manual_seed(2)
    return small_mlp(32, 64, 5).eval()


def outlier_inputs():
    """24 inputs for block_mlp with an outlier (1e4) beside a small value (0.01) in one MX block:
    the outlier sets the block's scale to 2^5 and its small neighbours flush to zero."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(24, 32, generator=g) * 2
    x[0, 3] = 1e4
    x[0, 4] = 0.01
    return x


def mx_quant(t):
    return MXTensor.to_mx(t, torch.float8_e4m3fn, 32)


def mx_rceil_quant(t):
    return MXTensor.to_mx(t, torch.float8_e4m3fn, 32, ScaleCalculationMode.RCEIL)


def nvfp4_quant(t):
    return NVFP4Tensor.to_nvfp4(t, per_tensor_scale=per_tensor_amax_to_scale(torch.max(torch.abs(t))))


class BlockScaledLinear(torch.nn.Module):
    """A linear layer as torchao emulates a block-scaled GEMM: both operands quantized along K
    (torchao's MXTensor or NVFP4Tensor, from FP32), torch.addmm(bias, a, W^T) dispatched to torchao's
    emulated GEMM (dequantized FP32 operands), the product cast to the autocast dtype (BF16)."""

    def __init__(self, lin, quant):
        super().__init__()
        self.weight, self.bias, self.quant = lin.weight, lin.bias, quant

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            a = self.quant(x.float().reshape(-1, x.shape[-1]).contiguous())
            w = self.quant(self.weight.float().contiguous())
            out = torch.addmm(self.bias.float(), a, w.t()) if self.bias is not None else torch.mm(a, w.t())
        return out.reshape(*x.shape[:-1], -1).to(torch.bfloat16)


def oracle_model(model, recipe):
    """The model as torchao runs `recipe` (a deep copy), and the class of its quantized linears."""
    m = copy.deepcopy(model)
    if recipe == "fp8-rowwise":
        cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
        return convert_to_float8_training(m, config=cfg), "Float8Linear"
    quant = {"mxfp8": mx_quant, "mxfp8-rceil": mx_rceil_quant}.get(recipe, nvfp4_quant)
    for name, mod in list(m.named_children()):
        if isinstance(mod, torch.nn.Linear):
            setattr(m, name, BlockScaledLinear(mod, quant))
    return m, "BlockScaledLinear"


ORACLE_SPEC = {"fp8-rowwise": {"scheme": "rowwise", "element": "e4m3", "axis": -1},
               "mxfp8": {"scheme": "mx", "element": "e4m3", "axis": -1},
               "nvfp4": {"scheme": "nvfp4", "element": "e2m1", "axis": -1}}


def oracle_run(model, x, recipe):
    """torchao's outputs for `recipe` under CPU BF16 autocast, and each quantized linear's operands
    (the input as the layer received it, its weight) counted by fp8_oracle from torchao's quantizers."""
    m, cls = oracle_model(model, recipe)
    seen = {}
    for name, mod in m.named_modules():
        if type(mod).__name__ == cls:
            mod.register_forward_pre_hook(lambda mod, args, name=name: seen.setdefault(name, args[0].detach()))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x).float().numpy()
    mods = dict(m.named_modules())
    ops = {}
    for name, inp in seen.items():
        ops[(name, "input")] = fp8_oracle.run_case(inp, ORACLE_SPEC[recipe])
        ops[(name, "weight")] = fp8_oracle.run_case(mods[name].weight.detach(), ORACLE_SPEC[recipe])
    return out, ops


def save_program(cls, d):
    """cls.model saved in d as TorchScript and torch.export (cls.paths by format), with probes cls.x
    (cls.probes; labels: its FP32 argmax)."""
    cls.paths = {"torchscript": os.path.join(d, "m.pt"), "export": os.path.join(d, "m.pt2")}
    torch.jit.script(cls.model).save(cls.paths["torchscript"])
    torch.export.save(torch.export.export(cls.model, (cls.x,)), cls.paths["export"])
    with torch.no_grad():
        ref = cls.model(cls.x)
    cls.probes = os.path.join(d, "probes.pt")
    torch.save({"inputs": cls.x, "labels": ref.argmax(1), "ids": [f"p{i}" for i in range(len(cls.x))]}, cls.probes)


def run_every_recipe(cls, d):
    """save_program; cls.want: torchao's outputs per recipe; cls.results: ampscope's run JSON per format."""
    save_program(cls, d)
    cls.want = {r: oracle_run(cls.model, cls.x, r) for r in cls.RECIPES}
    cls.want["fp8"] = (torchao_fp8(cls.model, cls.x), None)
    cls.results = {fmt: run_json("run", "--model", path, "--probes", cls.probes, "--precision",
                                 "fp8," + ",".join(cls.RECIPES), "--batch-size", len(cls.x), "--outputs",
                                 "--no-db")[1] for fmt, path in cls.paths.items()}


class Fp8Recipes(unittest.TestCase):
    """run --precision fp8-rowwise,mxfp8,nvfp4 against torchao 0.18, outputs bitwise and operand
    statistics exactly (SQNR to 1e-3 dB), on a TorchScript and a torch.export program."""

    RECIPES = ["fp8-rowwise", "mxfp8", "nvfp4"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model, cls.x = block_mlp(), outlier_inputs()
        cls.x[1, :] *= 1e-3  # a row of small values: rowwise scales it on its own, tensorwise does not
        run_every_recipe(cls, d)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_recipes_differ(self):
        outs = [self.want[r][0] for r in ["fp8"] + self.RECIPES]
        for i in range(len(outs)):
            for j in range(i):
                self.assertFalse(bits_equal(outs[i], outs[j]), (i, j))

    def test_outputs_bitwise_as_torchao(self):
        for fmt, result in self.results.items():
            for r in ["fp8"] + self.RECIPES:
                got, want = Fp8Run.outputs(result, r), self.want[r][0]
                self.assertTrue(bits_equal(got, want), f"{fmt} {r}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_batches_as_torchao_batch_by_batch(self):
        """--batch-size 8: three batches, each quantized with its own current scales (from the batch,
        never the probe set): outputs bitwise torchao's batch by batch; each operand's statistics
        the batches' merged (counts summed over the three, amax and the scale range over all)."""
        chunks = [self.x[i:i + 8] for i in range(0, len(self.x), 8)]
        # TorchScript: the export program was traced with a static batch of 24, which it keeps
        rc, result = run_json("run", "--model", self.paths["torchscript"], "--probes", self.probes, "--precision",
                              "fp8," + ",".join(self.RECIPES), "--batch-size", 8, "--outputs", "--no-db")
        self.assertIn(rc, (0, 1))
        want_fp8 = np.concatenate([torchao_fp8(self.model, c) for c in chunks])
        self.assertTrue(bits_equal(Fp8Run.outputs(result, "fp8"), want_fp8))
        self.assertFalse(bits_equal(want_fp8, self.want["fp8"][0]), "one scale for all 24 differs")
        for r in self.RECIPES:
            per = [oracle_run(self.model, c, r) for c in chunks]
            got, want = Fp8Run.outputs(result, r), np.concatenate([p[0] for p in per])
            self.assertTrue(bits_equal(got, want), f"{r}: max |diff| {np.nanmax(np.abs(got - want))}")
            ops = pass_of(result, r)["fp8_operands"]
            self.assertEqual(sorted((o["module"], o["operand"]) for o in ops), sorted(per[0][1]), r)
            for o in ops:
                ws, what = [p[1][(o["module"], o["operand"])] for p in per], f"{r} {o['module']} {o['operand']}"
                self.assertEqual(o["elements"], sum(w["numel"] for w in ws), what)
                for k in ("underflow", "subnormal", "saturated", "nonfinite_out"):
                    self.assertEqual(o[k], sum(w[k] for w in ws), f"{what} {k}")
                self.assertEqual(as_float(o["amax"]), max(as_float(w["amax"]) for w in ws), what)
                self.assertEqual(as_float(o["scale_min"]), min(w["scale_min"] for w in ws), what)
                self.assertEqual(as_float(o["scale_max"]), max(w["scale_max"] for w in ws), what)
        nv = [oracle_run(self.model, c, "nvfp4")[1][("fc1", "input")] for c in chunks]
        self.assertNotEqual(len({w["scale_max"] for w in nv}), 1, "the batches' NVFP4 scales differ")

    def test_mx_rceil_scales_as_torchao(self):
        """--mx-scaling rceil: the MX blocks as torchao's MXFP8 training recipes scale them
        (2^ceil(log2(amax / 448))), outputs bitwise; FLOOR's outputs differ on these inputs; the
        setting is in the run JSON and refused without an MX pass."""
        m, _ = oracle_model(self.model, "mxfp8-rceil")
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = m(self.x).float().numpy()
        self.assertFalse(bits_equal(want, self.want["mxfp8"][0]))
        for fmt, path in self.paths.items():
            rc, result = run_json("run", "--model", path, "--probes", self.probes, "--precision", "mxfp8",
                                  "--mx-scaling", "rceil", "--batch-size", len(self.x), "--outputs", "--no-db")
            self.assertIn(rc, (0, 1), fmt)
            self.assertEqual(result["mx_scaling"], "rceil")
            got = Fp8Run.outputs(result, "mxfp8")
            self.assertTrue(bits_equal(got, want), f"{fmt}: max |diff| {np.nanmax(np.abs(got - want))}")
        rc, _, err = run_cli("run", "--model", self.paths["export"], "--probes", self.probes, "--precision", "fp8",
                             "--mx-scaling", "rceil", "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("--mx-scaling", err)

    def test_operand_statistics_as_torchao(self):
        for fmt, result in self.results.items():
            for r in self.RECIPES:
                want = self.want[r][1]
                ops = pass_of(result, r)["fp8_operands"]
                self.assertEqual(sorted((o["module"], o["operand"]) for o in ops), sorted(want), f"{fmt} {r}")
                for o in ops:
                    w, what = want[(o["module"], o["operand"])], f"{fmt} {r} {o['module']} {o['operand']}"
                    self.assertEqual(o["scheme"], ORACLE_SPEC[r]["scheme"], what)
                    self.assertEqual(o["element"], ORACLE_SPEC[r]["element"], what)
                    self.assertEqual(o["elements"], w["numel"], what)
                    for k in ("underflow", "subnormal", "saturated", "nonfinite_out"):
                        self.assertEqual(o[k], w[k], f"{what} {k}")
                    self.assertEqual(as_float(o["amax"]), as_float(w["amax"]), what)
                    self.assertEqual(as_float(o["scale_min"]), w["scale_min"], what)
                    self.assertEqual(as_float(o["scale_max"]), w["scale_max"], what)
                    if "sqnr_db" in w:
                        self.assertAlmostEqual(as_float(o["sqnr_db"]), w["sqnr_db"], delta=1e-3, msg=what)
        # the outlier flushes small neighbours of its MX block to zero
        self.assertGreater(self.want["mxfp8"][1][("fc1", "input")]["underflow"], 0)


class Nvfp4TinyTensor(unittest.TestCase):
    """An input whose amax is below 2688 times the smallest float: NVFP4's per-tensor scale
    (amax / (448 * 6)) is 0 in FP32. torchao then scales an exact zero to 0 * inf = NaN, which its
    E2M1 cast takes as 1.5, dequantized times 0: the pass is torchao's bitwise, no non-finite
    value is born, and each flushed element is counted once (underflow, not saturated too)."""

    def test_outputs_bitwise_as_torchao_and_nothing_counted_twice(self):
        model = block_mlp()
        g = torch.Generator().manual_seed(9)
        x = torch.randn(8, 32, generator=g) * 1e-44  # a few smallest-float steps; many exact zeros
        x[3, 7] = 0.0
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.pt")
            torch.jit.script(model).save(path)
            probes = os.path.join(d, "p.pt")
            with torch.no_grad():
                torch.save({"inputs": x, "labels": model(x).argmax(1)}, probes)
            want, ops = oracle_run(model, x, "nvfp4")
            self.assertFalse(np.isnan(want).any())
            self.assertGreater(int((x == 0).sum()), 0)
            rc, result = run_json("run", "--model", path, "--probes", probes, "--precision", "nvfp4",
                                  "--batch-size", len(x), "--outputs", "--no-db")
        self.assertIn(rc, (0, 1))
        got = run_outputs(result, "nvfp4")
        self.assertTrue(bits_equal(got, want), f"max |diff| {np.nanmax(np.abs(got - want))}")
        p = pass_of(result, "nvfp4")
        self.assertEqual(p["nonfinite_samples"], [], p.get("first_nonfinite"))
        for o in p["fp8_operands"]:
            w = ops[(o["module"], o["operand"])]
            for k in ("underflow", "subnormal", "saturated", "nonfinite_out"):
                self.assertEqual(o[k], w[k], f"{o['module']} {o['operand']} {k}")
            self.assertLessEqual(o["underflow"] + o["subnormal"] + o["saturated"], o["elements"], o)
        first = next(o for o in p["fp8_operands"] if o["module"] == "fc1" and o["operand"] == "input")
        self.assertEqual(first["underflow"], int((x != 0).sum()))  # every non-zero value flushed


def gemm_mix():
    """Linears around a bmm, a matmul and a convolution: the GEMMs torchao's recipes do not convert."""
    torch.manual_seed(3)

    class GemmMix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(32, 64)
            self.conv = torch.nn.Conv1d(1, 2, 5, padding=2)
            self.fc2 = torch.nn.Linear(64, 5)

        def forward(self, x):
            a = self.fc1(x).view(-1, 4, 16)
            s = torch.bmm(a, a.transpose(1, 2)) * 0.25
            t = torch.matmul(torch.softmax(s, -1), a)
            c = self.conv(t.reshape(-1, 1, 64)).sum(1)
            return self.fc2(c)

    return GemmMix().eval()


class Fp8OnlyLinears(unittest.TestCase):
    """torchao 0.18 converts nn.Linear only (float8: swap_linear_layers; its MX and NVFP4 training
    recipes too), and has no float8 convolution: the bmm, matmul and Conv1d of a program stay in BF16
    autocast. Each recipe's outputs are torchao's bitwise on a program with all three, and
    fp8_operands names the linears only; the oracle with the bmm's operands quantized differs."""

    RECIPES = ["fp8-rowwise", "mxfp8", "nvfp4"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = gemm_mix()
        g = torch.Generator().manual_seed(7)
        cls.x = torch.randn(16, 32, generator=g) * 2
        run_every_recipe(cls, d)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_bmm_matmul_conv_stay_bf16_as_torchao(self):
        for fmt, result in self.results.items():
            for r in ["fp8"] + self.RECIPES:
                got, want = Fp8Run.outputs(result, r), self.want[r][0]
                self.assertTrue(bits_equal(got, want), f"{fmt} {r}: max |diff| {np.nanmax(np.abs(got - want))}")
                mods = sorted({o["module"] for o in pass_of(result, r)["fp8_operands"]})
                self.assertEqual(mods, ["fc1", "fc2"], f"{fmt} {r}")

    def test_quantized_bmm_would_differ(self):
        """The oracle can tell: with the bmm's operands cast to E4M3 (tensorwise, current scaling) the
        outputs are not the fp8 pass's."""
        real_bmm = torch.bmm

        def e4m3(t):
            s = 448.0 / t.abs().max().float().clamp(min=1e-12)
            return ((t.float() * s).clamp(-448, 448).to(torch.float8_e4m3fn).float() / s).to(t.dtype)

        torch.bmm = lambda a, b: real_bmm(e4m3(a), e4m3(b))
        try:
            quantized = torchao_fp8(self.model, self.x)
        finally:
            torch.bmm = real_bmm
        self.assertFalse(bits_equal(quantized, self.want["fp8"][0]))
        self.assertFalse(bits_equal(Fp8Run.outputs(self.results["export"], "fp8"), quantized))



class Fp8Stored(unittest.TestCase):
    """A recorded FP8 run keeps its operand statistics (table fp8_operands, schema v9): `show RUN
    --json` gives every pass's fp8_operands as `run --json` gave them, field for field; `show
    --layers` prints them; an export imported elsewhere carries them."""

    PRECISIONS = ["fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        model = block_mlp()
        g = torch.Generator().manual_seed(5)
        x = torch.randn(16, 32, generator=g) * 2
        x[0, 3] = 1e4  # saturates the delayed scale's first batch and flushes its MX block's neighbours
        x[1, :] *= 1e-6  # underflows tensorwise E4M3
        cls.path = os.path.join(d, "m.pt2")
        torch.export.save(torch.export.export(model, (x[:4],)), cls.path)
        cls.probes = os.path.join(d, "probes.pt")
        with torch.no_grad():
            labels = model(x).argmax(1)
        torch.save({"inputs": x, "labels": labels, "ids": [f"p{i}" for i in range(len(x))]}, cls.probes)
        cls.db = os.path.join(d, "runs.sqlite")
        cls.ran = run_json("run", "--model", cls.path, "--probes", cls.probes, "--precision",
                           ",".join(cls.PRECISIONS), "--batch-size", 4, "--db", cls.db)[1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def show_json(self, db):
        return json.loads(run_cli("show", self.ran["run_id"], "--json", "--db", db, check_rc=0)[1])

    def expect_same_operands(self, shown, what):
        for p in self.PRECISIONS:
            want = pass_of(self.ran, p)["fp8_operands"]
            self.assertGreater(len(want), 0, p)
            got = pass_of(shown, p).get("fp8_operands")
            self.assertIsNotNone(got, f"{what}: the {p} pass lost its fp8_operands")
            self.assertEqual(len(got), len(want), f"{what} {p}")
            for g, w in zip(got, want):
                self.assertEqual(list(g), list(w), f"{what} {p}: keys")
                for k in w:  # field for field, the same JSON value (a figure, or 'nan' / 'inf')
                    self.assertEqual(g[k], w[k], f"{what} {p} {w['module']} {w['operand']} {k}")
        self.assertNotIn("fp8_operands", pass_of(shown, "fp32"))

    def test_show_json_gives_the_operands_run_json_gave(self):
        ops = pass_of(self.ran, "fp8")["fp8_operands"]
        self.assertTrue(any(o["underflow"] > 0 for o in ops), ops)  # the planted figures are not all zero
        self.assertTrue(any(o["saturated"] > 0 for o in pass_of(self.ran, "fp8-delayed")["fp8_operands"]))
        self.expect_same_operands(self.show_json(self.db), "show --json")

    def test_show_layers_prints_the_operands(self):
        out = run_cli("show", self.ran["run_id"], "--layers", "--db", self.db, check_rc=0)[1]
        self.assertIn("fp8 operands (4; e4m3, tensorwise scales)", out)
        self.assertIn("fp8 operands (4; e4m3, mx scales)", out)
        self.assertIn("fp8 operands (4; e2m1, nvfp4 scales)", out)
        self.assertIn("fp8 operands (4; e4m3, delayed (amax history) scales)", out)

    def test_export_and_import_carry_the_operands(self):
        f = os.path.join(self.tmp.name, "x.ampscope")
        other = os.path.join(self.tmp.name, "other.sqlite")
        run_cli("export", self.ran["run_id"], "-o", f, "--db", self.db, check_rc=0)
        run_cli("import", f, "--db", other, check_rc=0)
        self.expect_same_operands(self.show_json(other), "imported")


class DelayedLinear(torch.nn.Module):
    """Transformer Engine's DelayedScaling as its documentation states the rule, for one linear
    layer's two GEMM operands (input, weight), each with its own amax history of `history` steps
    (one step = one batch): the cast of a step uses the scale computed at the end of the step
    before (1 at the first step: an empty history); the step's amax enters history[0]; at the
    end of the step amax = max(history), the history rolls by one and its first slot is zeroed,
    scale = (448 / amax) / 2^margin (kept when amax is 0 or not finite). The operand is cast with
    torchao's given-scale cast (clamped to +-448, E4M3) and the GEMM is the fp8 recipe's (mm in FP32,
    cast to BF16, + bias in BF16). `saturated` counts, per operand, the values above the stale
    scale's range (|x| * scale rounded past 448)."""

    def __init__(self, lin, history, margin):
        super().__init__()
        self.weight, self.bias, self.margin = lin.weight, lin.bias, margin
        self.hist = {k: torch.zeros(history) for k in ("input", "weight")}
        self.scale = {k: torch.tensor(1.0) for k in ("input", "weight")}
        self.scales = {k: [] for k in ("input", "weight")}
        self.saturated = {k: 0 for k in ("input", "weight")}

    def cast(self, t, which):
        scale = self.scale[which]
        self.scales[which].append(scale.item())
        self.hist[which][0] = torch.maximum(self.hist[which][0], torch.max(torch.abs(t.float())))
        self.saturated[which] += int(((t.float() * scale).abs() > 464.0).sum())
        f8 = hp_tensor_and_scale_to_float8(t, scale, torch.float8_e4m3fn, LinearMMConfig())
        return f8._data.float() / f8._scale

    def end_step(self):
        for k, h in self.hist.items():
            amax = torch.max(h)
            self.hist[k] = torch.roll(h, -1, 0)
            self.hist[k][0] = 0.0
            if torch.isfinite(amax) and amax > 0:
                sf = (torch.tensor(448.0) / amax) / (2.0 ** self.margin)
                self.scale[k] = torch.where(torch.isinf(sf), torch.tensor(torch.finfo(torch.float32).max), sf)

    def forward(self, x):
        xq, wq = self.cast(x, "input"), self.cast(self.weight, "weight")
        with torch.autocast("cpu", enabled=False):  # torchao's emulated GEMM runs below autocast: in FP32
            out = torch.mm(xq.reshape(-1, xq.shape[-1]), wq.t()).to(torch.bfloat16)
        return out.reshape(*x.shape[:-1], -1) + self.bias.to(torch.bfloat16)


def delayed_reference(model, x, batch, history, margin):
    """The model's outputs under delayed scaling, batches of `batch` in order, and its DelayedLinears."""
    m = copy.deepcopy(model)
    for name, mod in list(m.named_children()):
        if isinstance(mod, torch.nn.Linear):
            setattr(m, name, DelayedLinear(mod, history, margin))
    lins = {n: mod for n, mod in m.named_children() if isinstance(mod, DelayedLinear)}
    outs = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for b in range(0, len(x), batch):
            outs.append(m(x[b:b + batch]).float())
            for lin in lins.values():
                lin.end_step()
    return torch.cat(outs).numpy(), lins


class Fp8Delayed(unittest.TestCase):
    """run --precision fp8-delayed against the reference above: batches of 4 whose inputs grow
    4x per batch, so every batch after the first outruns the scale its history gives."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = block_mlp()
        g = torch.Generator().manual_seed(9)
        cls.x = torch.randn(16, 32, generator=g)
        for b in range(4):
            cls.x[4 * b:4 * b + 4] *= 4.0 ** b * 40  # batch 0 below 448 after scale 1 ... batch 3 far above
        cls.path = os.path.join(d, "m.pt2")
        torch.export.save(torch.export.export(cls.model, (cls.x[:4],)), cls.path)
        cls.probes = os.path.join(d, "probes.pt")
        with torch.no_grad():
            labels = cls.model(cls.x).argmax(1)
        torch.save({"inputs": cls.x, "labels": labels, "ids": [f"p{i}" for i in range(len(cls.x))]}, cls.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_delayed(self, *extra):
        return run_json("run", "--model", self.path, "--probes", self.probes, "--precision", "fp8-delayed",
                        "--batch-size", 4, "--outputs", "--no-db", *extra)[1]

    def check(self, result, history, margin):
        want, lins = delayed_reference(self.model, self.x, 4, history, margin)
        got = Fp8Run.outputs(result, "fp8-delayed")
        self.assertTrue(bits_equal(got, want), f"history {history} margin {margin}: max |diff| "
                                                 f"{np.nanmax(np.abs(got - want))}")
        ops = {(o["module"], o["operand"]): o for o in pass_of(result, "fp8-delayed")["fp8_operands"]}
        self.assertEqual(sorted(ops), sorted((n, k) for n in lins for k in ("input", "weight")))
        for (n, k), o in ops.items():
            lin = lins[n]
            self.assertEqual(o["saturated"], lin.saturated[k], f"{n} {k}")
            self.assertEqual(as_float(o["scale_min"]), min(lin.scales[k]), f"{n} {k}")
            self.assertEqual(as_float(o["scale_max"]), max(lin.scales[k]), f"{n} {k}")
        return lins

    def test_outputs_and_stale_scale_as_te_rule(self):
        result = self.run_delayed()
        lins = self.check(result, 1024, 0)
        # fc1's input grows 4x a batch: every batch after the first saturates part of it
        self.assertGreater(lins["fc1"].saturated["input"], 0)
        ops = {(o["module"], o["operand"]): o for o in pass_of(result, "fp8-delayed")["fp8_operands"]}
        self.assertGreater(ops[("fc1", "input")]["saturated_share"], 0)
        self.assertTrue(any("first batch" in w for w in result["warnings"]), result["warnings"])

    def test_layers_name_delayed_scales_and_list_finds_the_run(self):
        db = os.path.join(self.tmp.name, "delayed.sqlite")
        rc, out, err = run_cli("run", "--model", self.path, "--probes", self.probes, "--precision", "fp8-delayed",
                               "--batch-size", 4, "--layers", "--db", db, check_rc=1)  # rejected: scores move
        self.assertIn("e4m3, delayed (amax history) scales", out)
        self.assertNotIn("tensorwise", out)
        runs = json.loads(run_cli("list", "--json", "--db", db, "--precision", "fp8-delayed", check_rc=0)[1])
        self.assertEqual(len(runs), 1, runs)
        for name in ("fp8", "fp8-rowwise", "mxfp8", "nvfp4"):  # every name a run records is a filter
            self.assertEqual(json.loads(run_cli("list", "--json", "--db", db, "--precision", name, check_rc=0)[1]), [])

    def test_refused_under_torchrun_naming_the_field(self):
        import socket
        import subprocess
        from common import CLI
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        db = os.path.join(self.tmp.name, "torchrun.sqlite")
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([CLI, "run", "--model", self.path, "--probes", self.probes, "--precision",
                                           "bf16,fp8-delayed", "--batch-size", "4", "--db", db], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          stdin=subprocess.DEVNULL))
        for rank, p in enumerate(procs):
            _, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 2, f"rank {rank}: {err}")
            self.assertIn("--precision: fp8-delayed under torchrun", err, f"rank {rank}")

class Fp8DelayedSettings(unittest.TestCase):
    """run --precision fp8-delayed --fp8-amax-history 2 --fp8-margin 1 against the reference above
    with those settings: five batches of 4, the second 100x the others, so a history of 2 batches
    forgets it two batches later (a history of 1024 does not) and the margin halves every scale."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = block_mlp()
        g = torch.Generator().manual_seed(11)
        cls.x = torch.randn(20, 32, generator=g) * 40
        cls.x[4:8] *= 100.0  # batch 1: its amax sets the scales of batches 2 and 3 (history 2), or all after it
        cls.path = os.path.join(d, "m.pt2")
        torch.export.save(torch.export.export(cls.model, (cls.x[:4],)), cls.path)
        cls.probes = os.path.join(d, "probes.pt")
        with torch.no_grad():
            labels = cls.model(cls.x).argmax(1)
        torch.save({"inputs": cls.x, "labels": labels, "ids": [f"p{i}" for i in range(len(cls.x))]}, cls.probes)
        cls.db = os.path.join(d, "runs.sqlite")
        cls.result = run_json("run", "--model", cls.path, "--probes", cls.probes, "--precision", "fp8-delayed",
                              "--batch-size", 4, "--outputs", "--db", cls.db, "--fp8-amax-history", 2,
                              "--fp8-margin", 1)[1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_outputs_and_scales_as_te_rule_with_the_settings(self):
        want, lins = delayed_reference(self.model, self.x, 4, 2, 1)
        default, _ = delayed_reference(self.model, self.x, 4, 1024, 0)
        self.assertFalse(bits_equal(want, default), "the settings should change the outputs")
        got = Fp8Run.outputs(self.result, "fp8-delayed")
        self.assertTrue(bits_equal(got, want), f"max |diff| {np.nanmax(np.abs(got - want))}")
        ops = {(o["module"], o["operand"]): o for o in pass_of(self.result, "fp8-delayed")["fp8_operands"]}
        self.assertEqual(sorted(ops), sorted((n, k) for n in lins for k in ("input", "weight")))
        for (n, k), o in ops.items():
            self.assertEqual(o["saturated"], lins[n].saturated[k], f"{n} {k}")
            self.assertEqual(as_float(o["scale_min"]), min(lins[n].scales[k]), f"{n} {k}")
            self.assertEqual(as_float(o["scale_max"]), max(lins[n].scales[k]), f"{n} {k}")
        # history 2: fc1's input scale recovers at batch 4 (from batches 2 and 3), halved by the margin
        s = lins["fc1"].scales["input"]
        self.assertEqual(len(s), 5)
        self.assertLess(s[2], s[1] / 10)
        self.assertGreater(s[4], s[3] * 10)

    def test_settings_stored_with_the_spec_and_shown(self):
        want = {"amax_history": 2, "margin": 1, "amax_compute_algo": "max"}
        self.assertEqual(self.result["fp8_delayed"], want)
        self.assertTrue(any("amax history 2, margin 1" in w for w in self.result["warnings"]), self.result["warnings"])
        shown = json.loads(run_cli("show", self.result["run_id"], "--json", "--db", self.db, check_rc=0)[1])
        self.assertEqual(shown["fp8_delayed"], want)
        out = run_cli("show", self.result["run_id"], "--db", self.db, check_rc=0)[1]
        self.assertIn("fp8-delayed: amax history 2 batches, margin 1", out)
        # a run without an fp8-delayed pass keeps its JSON as it was
        other = run_json("run", "--model", self.path, "--probes", self.probes, "--precision", "fp8",
                         "--batch-size", 4, "--no-db")[1]
        self.assertNotIn("fp8_delayed", other)

    def test_one_batch_says_the_settings_change_nothing(self):
        """The probes in one batch: it casts with scale 1 and no history, so history and margin change
        nothing; the run says so (was: silently, the settings recorded as applied)."""
        base = ["run", "--model", "demo:mlp", "--probes", "demo", "--precision", "fp8-delayed", "--fp8-margin", 3,
                "--no-db"]
        one = run_json(*base)[1]  # 40 probes, batch size 64
        self.assertTrue(any("fp8-delayed: the 40 probes run as one batch" in w and "--fp8-margin" in w
                            for w in one["warnings"]), one["warnings"])
        several = run_json(*base, "--batch-size", 8)[1]
        self.assertFalse(any("run as one batch" in w for w in several["warnings"]), several["warnings"])
        # a program of a static batch: no --batch-size helps, more probes than the batch do
        four = os.path.join(self.tmp.name, "four.pt")
        torch.save({"inputs": self.x[:4]}, four)
        static = run_json("run", "--model", self.path, "--probes", four, "--precision", "fp8-delayed", "--no-db")[1]
        self.assertTrue(any("the program's static batch is 4: more probes than that run several batches" in w
                            for w in static["warnings"]), static["warnings"])

    def test_bad_values_exit_2_naming_the_flag(self):
        base = ["run", "--model", self.path, "--probes", self.probes, "--batch-size", 4, "--no-db"]
        for flag, value, precision in [("--fp8-amax-history", "0", "fp8-delayed"),
                                       ("--fp8-amax-history", "x", "fp8-delayed"),
                                       ("--fp8-amax-history", "99999999999", "fp8-delayed"),
                                       ("--fp8-margin", "-1", "fp8-delayed"),
                                       ("--fp8-margin", "1.5", "fp8-delayed"),
                                       ("--fp8-margin", "1000", "fp8-delayed"),
                                       ("--fp8-amax-history", "16", "bf16,fp8"),
                                       ("--fp8-margin", "1", "fp8")]:
            rc, out, err = run_cli(*base, "--precision", precision, flag, value)
            self.assertEqual(rc, 2, f"{flag} {value} with {precision}: {err}")
            self.assertIn(flag, err, f"{flag} {value} with {precision}")


class Fp8WhatIf(unittest.TestCase):
    """run --precision bf16 --fp8-what-if: the BF16 pass's outputs are those of a plain BF16 pass,
    bitwise, and it lists, per linear layer, operand and current-scaling recipe (fp8, fp8-rowwise,
    mxfp8, nvfp4), the statistics fp8_oracle counts from torchao's quantizers on the operands the
    BF16 pass hands its linears; fc1's equal those of the real FP8 passes (the same operands there:
    the probe input and the weight). Recorded and shown as run --json gave them."""

    RECIPE_SPEC = {"fp8": {"scheme": "tensorwise", "element": "e4m3", "axis": -1}, **ORACLE_SPEC}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model, cls.x = block_mlp(), outlier_inputs()
        cls.pt2 = os.path.join(d, "m.pt2")
        torch.export.save(torch.export.export(cls.model, (cls.x,)), cls.pt2)
        cls.probes = os.path.join(d, "probes.pt")
        with torch.no_grad():
            ref = cls.model(cls.x)
        torch.save({"inputs": cls.x, "labels": ref.argmax(1)}, cls.probes)
        cls.db = os.path.join(d, "runs.sqlite")
        base = ("run", "--model", cls.pt2, "--probes", cls.probes, "--batch-size", len(cls.x), "--outputs")
        cls.what_if = run_json(*base, "--precision", "bf16", "--fp8-what-if", "--db", cls.db)[1]
        cls.plain = run_json(*base, "--precision", "bf16", "--no-db")[1]
        cls.real = run_json(*base, "--precision", ",".join(cls.RECIPE_SPEC), "--no-db")[1]
        seen = {}  # each linear's input as the BF16 pass hands it over
        m = copy.deepcopy(cls.model)
        for name, mod in m.named_modules():
            if isinstance(mod, torch.nn.Linear):
                mod.register_forward_pre_hook(lambda mod, args, name=name: seen.setdefault(name, args[0].detach()))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            m(cls.x)
        cls.want = {}
        for recipe, spec in cls.RECIPE_SPEC.items():
            for name, inp in seen.items():
                cls.want[(recipe, name, "input")] = fp8_oracle.run_case(inp, spec)
                cls.want[(recipe, name, "weight")] = fp8_oracle.run_case(getattr(m, name).weight.detach(), spec)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def entries(self, result):
        return pass_of(result, "bf16")["fp8_what_if"]

    def test_the_bf16_pass_is_unchanged(self):
        self.assertTrue(bits_equal(Fp8Run.outputs(self.what_if, "bf16"), Fp8Run.outputs(self.plain, "bf16")))
        self.assertNotIn("fp8_what_if", pass_of(self.plain, "bf16"))
        self.assertTrue(self.what_if["fp8_what_if"])
        self.assertNotIn("fp8_what_if", self.plain)

    def test_statistics_as_torchaos_quantizers(self):
        got = self.entries(self.what_if)
        self.assertEqual(sorted((o["recipe"], o["module"], o["operand"]) for o in got), sorted(self.want))
        for o in got:
            w, what = self.want[(o["recipe"], o["module"], o["operand"])], f"{o['recipe']} {o['module']} {o['operand']}"
            self.assertEqual(o["scheme"], self.RECIPE_SPEC[o["recipe"]]["scheme"], what)
            self.assertEqual(o["elements"], w["numel"], what)
            for k in ("underflow", "subnormal", "saturated", "nonfinite_out"):
                self.assertEqual(o[k], w[k], f"{what} {k}")
            self.assertEqual(as_float(o["amax"]), as_float(w["amax"]), what)
            self.assertEqual(as_float(o["scale_min"]), w["scale_min"], what)
            self.assertEqual(as_float(o["scale_max"]), w["scale_max"], what)
            self.assertAlmostEqual(as_float(o["sqnr_db"]), w["sqnr_db"], delta=1e-3, msg=what)
        self.assertGreater(self.want[("mxfp8", "fc1", "input")]["underflow"], 0)  # the outlier's block

    def test_fc1_as_the_real_passes_count_it(self):
        got = {(o["recipe"], o["operand"]): o for o in self.entries(self.what_if) if o["module"] == "fc1"}
        for recipe in self.RECIPE_SPEC:
            for real in pass_of(self.real, recipe)["fp8_operands"]:
                if real["module"] != "fc1":
                    continue
                mine = dict(got[(recipe, real["operand"])])
                self.assertEqual(mine.pop("recipe"), recipe)
                self.assertEqual(mine, real, f"{recipe} fc1 {real['operand']}")

    def test_recorded_shown_and_refused(self):
        shown = json.loads(run_cli("show", self.what_if["run_id"], "--json", "--db", self.db, check_rc=0)[1])
        self.assertEqual(self.entries(shown), self.entries(self.what_if))
        self.assertTrue(shown["fp8_what_if"])
        text = run_cli("show", self.what_if["run_id"], "--db", self.db, check_rc=0)[1]
        for recipe in self.RECIPE_SPEC:
            self.assertIn(f"fp8 what-if {recipe}", text)
        self.assertIn("fp8 what-if (16; this pass's GEMM operands",
                      run_cli("show", self.what_if["run_id"], "--layers", "--db", self.db, check_rc=0)[1])
        base = ("run", "--model", self.pt2, "--probes", self.probes, "--fp8-what-if", "--no-db")
        for extra, words in ((("--precision", "fp16"), "no bf16 pass"), (("--precision", "bf16", "--no-inspect"), "inspection is off")):
            rc, _, err = run_cli(*base, *extra)
            self.assertEqual(rc, 2, err)
            self.assertIn("--fp8-what-if: ", err)
            self.assertIn(words, err)


class Fp8OperandTable(unittest.TestCase):
    """The operand table of `run --layers` keeps its columns under a UTF-8 module name (a column is
    a character, not a byte: "blöck" shifted the rest by one) and shows an MX pass's scale range
    whole (it was cut to "1.02e+03..2.~")."""

    def test_columns_line_up_and_scales_are_whole(self):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(4)
                self.blocks = torch.nn.ModuleDict({"blöck": torch.nn.Linear(32, 32), "out": torch.nn.Linear(32, 5)})

            def forward(self, x):
                return self.blocks["out"](self.blocks["blöck"](x))

        x = torch.randn(8, 32) * torch.logspace(-4, 4, 32)  # block scales over many powers of two
        with tempfile.TemporaryDirectory() as d:
            # torch.export: LibTorch cannot load a TorchScript file naming a module outside ASCII
            path, probes = os.path.join(d, "m.pt2"), os.path.join(d, "p.pt")
            torch.export.save(torch.export.export(Net(), (x,)), path)
            torch.save({"inputs": x, "labels": torch.zeros(8, dtype=torch.long)}, probes)
            rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--precision", "mxfp8", "--layers",
                                   "--no-db")
        self.assertIn(rc, (0, 1), err)
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines) if line.strip().startswith("module") and "operand" in line)
        col, scale = lines[head].index("operand"), lines[head].index("scale")
        rows = [line for line in lines[head + 1:head + 5]]
        self.assertTrue(any("blöck" in r for r in rows), rows)
        for r in rows:
            self.assertTrue(r[col:].startswith(("input", "weight")), f"{r!r}: the operand column moved")
            field = r[scale:].split()[0]
            self.assertNotIn("~", field, r)
        self.assertTrue(any(".." in r[scale:].split()[0] for r in rows), rows)


class Fp8WhatIfWithoutGemms(unittest.TestCase):
    """--fp8-what-if on a model without a linear layer: the run says the what-if met no GEMM and
    has nothing to show, as the FP8 passes say no GEMM ran in FP8 (it said nothing, and printed no
    what-if lines); a model with linears keeps the what-if silent about it."""

    def test_says_there_is_nothing_to_show(self):
        class NoLinear(torch.nn.Module):
            def forward(self, x):
                return torch.tanh(x) * 2

        with tempfile.TemporaryDirectory() as d:
            path, probes = os.path.join(d, "m.pt"), os.path.join(d, "p.pt")
            torch.jit.script(NoLinear()).save(path)
            torch.save({"inputs": torch.randn(6, 4), "labels": torch.zeros(6, dtype=torch.long)}, probes)
            rc, r = run_json("run", "--model", path, "--probes", probes, "--precision", "bf16", "--fp8-what-if",
                             "--no-db")
            self.assertIn(rc, (0, 1))
            self.assertTrue(any(w.startswith("fp8 what-if: no GEMM of the model ran") for w in r["warnings"]),
                            r["warnings"])
            rc, r = run_json("run", "--model", "demo:mlp", "--probes", "demo", "--precision", "bf16", "--fp8-what-if",
                             "--no-db")
            self.assertFalse(any(w.startswith("fp8 what-if:") for w in r["warnings"]), r["warnings"])


class Fp8Advise(unittest.TestCase):
    """`advise --precision fp8`: the least set of modules to keep in BF16 (left out of FP8), found
    and verified by ampscope, is the least subset of {fc1, fc2} that torchao's FP8 model with those
    modules unconverted (module_filter_fn) brings within the tolerance; the tolerance is chosen
    here, from torchao's own errors, so that exactly one module is the answer. The JSON names the
    set keep_bf16 (keep_fp32 empty), the snippet's filter gives torchao's model, and an FP8 advice
    is refused where an FP32 set is expected."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model, cls.x = planted_mlp()
        cls.pt2 = os.path.join(d, "mlp.pt2")
        torch.export.save(torch.export.export(cls.model, (cls.x,)), cls.pt2)
        cls.probes = os.path.join(d, "probes.pt")
        with torch.no_grad():
            ref = cls.model(cls.x).numpy()
        torch.save({"inputs": cls.x, "labels": torch.from_numpy(ref.argmax(1))}, cls.probes)
        err = {keep: float(np.abs(torchao_fp8(cls.model, cls.x, keep=keep, fp32=False).astype(np.float64) - ref).max())
               for keep in [(), ("fc1",), ("fc2",)]}
        cls.best, other = sorted([("fc1",), ("fc2",)], key=lambda k: err[k])
        cls.err = err
        cls.atol = (err[cls.best] + min(err[()], err[other])) / 2
        cls.db = os.path.join(d, "runs.sqlite")
        cls.json_path, cls.py_path = os.path.join(d, "advice.json"), os.path.join(d, "advice.py")
        cls.rc, cls.out, cls.err_text = run_cli(
            "advise", "--model", cls.pt2, "--probes", cls.probes, "--precision", "fp8", "--atol", repr(cls.atol),
            "--rtol", 0, "--max-flips", len(cls.x), "--batch-size", len(cls.x), "--db", cls.db, "--json",
            cls.json_path, "--python", cls.py_path)
        cls.advice = json.load(open(cls.json_path)) if os.path.exists(cls.json_path) else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_least_bf16_set_is_torchaos(self):
        e = self.err
        self.assertLess(e[self.best] * 1.05, self.atol, e)  # a clear gap: one module is the answer
        self.assertLess(self.atol * 1.05, min(v for k, v in e.items() if k != self.best), e)
        self.assertEqual(self.rc, 0, f"{self.out}\n{self.err_text}")
        a = self.advice
        self.assertEqual(a["outcome"], "found", a["message"])
        self.assertEqual(a["keep_bf16"], list(self.best))
        self.assertEqual(a["keep_fp32"], [])
        self.assertEqual(a["kept_in"], "bf16")
        self.assertEqual(a["fp32_share"]["ops"], 0.5)  # of the two linears (the GEMMs FP8 quantizes), one kept
        self.assertEqual(a["verified_verdict"], "accepted")
        self.assertIn("kept in BF16", a["message"])
        self.assertIn(f"keep in BF16:\n  {self.best[0]}", self.out)
        # the verifying run is recorded with the set as its BF16 list
        shown = json.loads(run_cli("show", a["verified_run"], "--json", "--db", self.db, check_rc=0)[1])
        self.assertEqual(shown["keep_bf16"], list(self.best))
        self.assertEqual(shown["advised_from"], None)

    def test_snippet_filter_gives_torchaos_model(self):
        ns = {}
        exec(open(self.py_path).read(), ns)
        self.assertEqual(ns["KEEP_BF16"], list(self.best))
        m = convert_to_float8_training(copy.deepcopy(self.model), config=Float8LinearConfig(emulate=True),
                                       module_filter_fn=ns["module_filter_fn"])
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            got = m(self.x).float().numpy()
        self.assertTrue(bits_equal(got, torchao_fp8(self.model, self.x, keep=self.best, fp32=False)))
        self.assertIn('from_recipe_name("tensorwise")', open(self.py_path).read())

    def test_mixed_precisions_and_fp32_file_refused(self):
        rc, _, err = run_cli("advise", "--model", self.pt2, "--probes", self.probes, "--precision", "fp8,bf16",
                             "--no-db", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("--precision: 'bf16' beside 'fp8'", err)
        rc, _, err = run_cli("run", "--model", self.pt2, "--probes", self.probes, "--precision", "fp16",
                             "--keep-fp32-file", self.json_path, "--no-db", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("field 'keep_bf16'", err)

    def test_run_keeps_the_advised_bf16_set_from_its_file(self):
        """run --keep-bf16-file ADVICE.json: the advised set kept in BF16, as the verifying run had it
        (the same outputs, bitwise), a text file of globs too; a file naming a module the
        model lacks, or an FP8 set without an FP8 pass are refused naming the file."""
        args = ["run", "--model", self.pt2, "--probes", self.probes, "--batch-size", len(self.x), "--outputs",
                "--no-db"]
        rc, got = run_json(*args, "--precision", "fp8", "--keep-bf16-file", self.json_path)
        self.assertEqual(got["keep_bf16"], list(self.best))
        out = np.array([[as_float(v) for v in r] for r in pass_of(got, "fp8")["outputs"]], dtype=np.float32)
        self.assertTrue(bits_equal(out, torchao_fp8(self.model, self.x, keep=self.best, fp32=False)))
        globs = os.path.join(self.tmp.name, "bf16.txt")
        with open(globs, "w") as f:
            f.write("# kept in BF16\n%s\n" % self.best[0])
        rc, got = run_json(*args, "--precision", "fp8", "--keep-bf16", self.best[0],
                           "--keep-bf16-file", globs)
        self.assertEqual(got["keep_bf16"], [self.best[0], self.best[0]])
        with open(globs, "w") as f:
            f.write("fc9\n")
        rc, _, err = run_cli(*args, "--precision", "fp8", "--keep-bf16-file", globs)
        self.assertEqual(rc, 2, err)
        self.assertIn(globs, err)
        self.assertIn("'fc9' matches no module", err)
        rc, _, err = run_cli(*args, "--precision", "bf16", "--keep-bf16-file", self.json_path)
        self.assertEqual(rc, 2, err)
        self.assertIn(self.json_path, err)
        self.assertIn("no FP8 pass", err)
        # an advice whose set is kept in FP32, or that found no set, is no BF16 list (were: kept nothing)
        for edit, field, said in (({"kept_in": "fp32"}, "kept_in", "'fp32': the set of fp16/bf16 passes"),
                                  ({"outcome": "whole_model_only"}, "outcome", "'whole_model_only': no set")):
            with open(self.json_path) as f:
                advice = json.load(f)
            advice.update(edit)
            edited = os.path.join(self.tmp.name, "edited.json")
            with open(edited, "w") as f:
                json.dump(advice, f)
            rc, _, err = run_cli(*args, "--precision", "fp8", "--keep-bf16-file", edited)
            self.assertEqual(rc, 2, err)
            self.assertIn(f"{edited}: field '{field}'", err)
            self.assertIn(said, err)


def trained_block_mlp(cls):
    """cls.tmp, cls.model (block_mlp in train mode) and cls.path (its TorchScript); returns the folder."""
    cls.tmp = tempfile.TemporaryDirectory()
    cls.model = block_mlp().train()
    cls.path = os.path.join(cls.tmp.name, "mlp.pt")
    torch.jit.script(cls.model).save(cls.path)
    return cls.tmp.name


def float8_training(model, recipe):
    """`model` converted as torchao trains `recipe` (fp8: tensorwise; fp8-rowwise), emulated."""
    cfg = Float8LinearConfig(emulate=True) if recipe == "fp8" else dataclasses.replace(
        Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
    return convert_to_float8_training(model, config=cfg)


class Fp8Train(unittest.TestCase):
    """train --precision fp8 / fp8-rowwise against torchao 0.18's float8 training in Python: the same
    TorchScript model, data and SGD steps; the AMP side converted with convert_to_float8_training
    (emulate=True; the tensorwise recipe, or "rowwise") under torch.autocast("cpu", torch.bfloat16),
    without a GradScaler (--no-scaler), as torchao trains. Every step's AMP loss is torchao's
    bitwise: the forward GEMMs take E4M3 operands, the backward's
    grad_output is E5M2 (tensorwise) or E4M3 with power-of-two row scales (rowwise), and both
    gradient GEMMs quantize along their own reduction dimension."""

    STEPS, BATCH, LR = 8, 16, 0.5

    @classmethod
    def setUpClass(cls):
        d = trained_block_mlp(cls)
        g = torch.Generator().manual_seed(7)
        cls.x = torch.randn(40, 32, generator=g) * 3  # 40 samples, batches of 16: the last one is 8
        cls.x[3, 5] = 300.0  # one large input: fc1's tensorwise scale follows it, its rows do not
        cls.y = torch.randint(0, 5, (40,), generator=g)
        cls.data = os.path.join(d, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def torchao_training(self, recipe):
        m = float8_training(copy.deepcopy(self.model).train(), recipe)
        opt = torch.optim.SGD(m.parameters(), lr=self.LR)
        losses, cursor = [], 0
        for _ in range(self.STEPS):
            b, e = cursor, min(len(self.x), cursor + self.BATCH)
            cursor = 0 if e >= len(self.x) else e
            losses.append(ce_step(m, opt, self.x[b:e], self.y[b:e]))
        return losses

    def ampscope_training(self, recipe, d):
        out = os.path.join(d, recipe + ".json")
        rc, so, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", self.STEPS, "--batch-size",
                             self.BATCH, "--lr", self.LR, "--precision", recipe, "--no-scaler", "--loss", "ce",
                             "--device", "cpu", "--no-db", "--json", out, "-q")
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            return json.load(f)

    def test_every_step_bitwise_as_torchao(self):
        """Each step's loss is computed on the weights every step before it updated: equal losses
        at every step say equal forwards, gradients and updates."""
        finals = {}
        for recipe in ("fp8", "fp8-rowwise"):
            with tempfile.TemporaryDirectory() as d:
                want = self.torchao_training(recipe)
                got = self.ampscope_training(recipe, d)
                self.assertEqual(got["precision"], recipe)
                self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want, recipe)
                finals[recipe] = want[-1]
        self.assertNotEqual(finals["fp8"], finals["fp8-rowwise"], "the recipes train differently")
        # and neither is BF16's training (the FP8 GEMMs are really there)
        m = copy.deepcopy(self.model).train()
        opt = torch.optim.SGD(m.parameters(), lr=self.LR)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = torch.nn.functional.cross_entropy(m(self.x[:self.BATCH]), self.y[:self.BATCH]).item()
        with tempfile.TemporaryDirectory() as d:
            self.assertNotEqual(as_float(self.ampscope_training("fp8", d)["steps"][0]["loss_amp"]), bf16)


class Fp8Replay(unittest.TestCase):
    """replay --precision fp8 / fp8-rowwise: a job trained with torchao's float8 recipe (Adam, BF16
    autocast, no GradScaler) saves its state after K steps ({"model", "optimizer"}, as a plain loop
    does); the replay of step K+1 on the next batch gives torchao's AMP loss and every updated
    parameter bitwise (sha256), the reference side FP32, and says the job ran without GradScaler."""

    K = 3

    @classmethod
    def setUpClass(cls):
        d = trained_block_mlp(cls)
        g = torch.Generator().manual_seed(11)
        cls.batches = [(torch.randn(16, 32, generator=g) * 3, torch.randint(0, 5, (16,), generator=g))
                       for _ in range(cls.K + 1)]
        cls.batch = os.path.join(d, "batch.pt")
        torch.save({"inputs": cls.batches[-1][0], "labels": cls.batches[-1][1]}, cls.batch)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def job(self, recipe):
        """The job up to step K (its checkpoint), then step K+1 in Python: AMP and FP32 sides."""
        m = float8_training(copy.deepcopy(self.model), recipe)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        for x, y in self.batches[:-1]:
            ce_step(m, opt, x, y)
        ckpt = os.path.join(self.tmp.name, recipe + "-ckpt.pt")
        state = (copy.deepcopy(m.state_dict()), copy.deepcopy(opt.state_dict()))
        torch.save({"model": state[0], "optimizer": state[1]}, ckpt)
        want = {}
        for side, amp in (("amp", True), ("ref", False)):
            net = copy.deepcopy(self.model)
            net.load_state_dict(state[0])
            if amp:
                net = float8_training(net, recipe)
            o = torch.optim.Adam(net.parameters(), lr=1e-2)
            o.load_state_dict(copy.deepcopy(state[1]))
            loss = ce_step(net, o, *self.batches[-1], amp=amp)
            want[side] = (loss, {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()
                                 for n, p in net.named_parameters()})
        return ckpt, want

    def test_step_bitwise_as_torchao(self):
        losses = {}
        for recipe in ("fp8", "fp8-rowwise"):
            ckpt, want = self.job(recipe)
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "replay.json")
                rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", self.batch,
                                     "--precision", recipe, "--optimizer", "adam", "--json", out, "-q")
                self.assertIn(rc, (0, 1), se)
                with open(out) as f:
                    got = json.load(f)
            self.assertEqual(got["precision"], recipe)
            step = got["steps"][-1]
            self.assertEqual(as_float(step["loss_amp"]), want["amp"][0], recipe)
            self.assertEqual(as_float(step["loss_ref"]), want["ref"][0], recipe)
            for p in step["params"]:
                self.assertEqual(p["sha256_amp"], want["amp"][1][p["name"]], f"{recipe} AMP {p['name']}")
                self.assertEqual(p["sha256_ref"], want["ref"][1][p["name"]], f"{recipe} FP32 {p['name']}")
            self.assertTrue(any("runs without GradScaler" in w for w in got["warnings"]), got["warnings"])
            losses[recipe] = want["amp"][0]
        self.assertNotEqual(losses["fp8"], losses["fp8-rowwise"])

    def test_other_recipes_refused_by_name(self):
        rc, _, err = run_cli("replay", "--model", self.path, "--checkpoint", self.path, "--batch", self.batch,
                             "--precision", "nvfp4")
        self.assertEqual(rc, 2, err)
        self.assertIn("'nvfp4'; expected fp16, bf16, fp8, fp8-rowwise or mxfp8 (nvfp4 trains with `train` only)", err)


if __name__ == "__main__":
    unittest.main()
