# SPDX-License-Identifier: MIT
"""torch.export programs run as eager PyTorch runs the module: train/eval changes exactly what
eager model.train() / model.eval() change, the program's own metadata is honoured (dtype
assertions under autocast, requires_grad, weight metadata, input dtypes), symbolic shapes follow
Python semantics, and the padding of a static batch is not counted. Every program is written
here by Python torch (the same wheel) and every oracle is eager PyTorch computed here."""
import copy
import json
import math
import os
import sqlite3
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, pass_of, run_cli, run_json
from test_export import SEED, ExportCase, bits_equal, edit_json, outputs_of, rewrite

PLACEHOLDER = "_empty_nn_module_stack_from_metadata_hook"


def graph_nodes(j):
    return j["graph_module"]["graph"]["nodes"]


class FloatCast(nn.Module):
    """`.float()` on a module's output: export records aten._assert_tensor_metadata(dtype=float32)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 16)
        self.b = nn.Linear(16, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x).float()))


class NoRunningStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 8)
        self.bn = nn.BatchNorm1d(8, track_running_stats=False)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        return self.b(self.bn(self.a(x)))


class FixedFlags(nn.Module):
    """Functional calls with literal flags: eager train()/eval() change neither."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 8)
        self.b = nn.Linear(8, 3)
        self.register_buffer("rm", torch.linspace(-0.5, 0.5, 8))
        self.register_buffer("rv", torch.linspace(0.5, 2.0, 8))

    def forward(self, x):
        h = F.batch_norm(self.a(x), self.rm, self.rv, training=False)
        return self.b(F.dropout(h, 0.5, training=True))


class Driven(nn.Module):
    """BatchNorm with running statistics and a Dropout module: both follow the mode."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.3)
        self.b = nn.Linear(8, 3)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.b(self.drop(torch.relu(self.bn(self.a(x)))))


class SymFloat(nn.Module):
    """Float arithmetic on the batch size (sym_float, truediv, mul by 0.25 / 0.5)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        n = x.shape[0]
        h = self.a(x) * (n / 4) + n * 0.25 - (n // 2) * 0.5
        return self.b(h) * (n * 0.5)


class Planted(nn.Module):
    """A sample row whose features sum to more than 16.4 overflows FP16 in `big` (4000 x the sum)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(12, 12)
        self.big = nn.Linear(12, 12)
        self.out = nn.Linear(12, 3)
        with torch.no_grad():
            self.inp.weight.copy_(torch.eye(12))
            self.inp.bias.zero_()
            self.big.weight.fill_(4000.0)
            self.big.bias.zero_()

    def forward(self, x):
        return self.out(torch.tanh(self.big(self.inp(x))))


class PlantedDynamic(Planted):
    """Reads the batch size: a dynamic batch's sym_size node (export's placeholder module path).
    No tanh: the overflow reaches the output, so AMP is rejected and the advisor searches."""

    def forward(self, x):
        return self.out(self.big(self.inp(x.reshape(x.shape[0], 12))))


def save_probes(path, x, **extra):
    torch.save({"inputs": x, "ids": [f"s{i}" for i in range(len(x))], **extra}, path)


def export_to(path, model, x, dynamic=False):
    dyn = {"x": {0: torch.export.Dim("batch")}} if dynamic else None
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes=dyn), path)


def eager_out(model, x, precision="fp32", train=False, keep_fp32=None):
    m = copy.deepcopy(model).train(train)
    torch.manual_seed(SEED)
    with torch.no_grad():
        if precision == "fp32":
            return m(x).float().numpy()
        with torch.autocast("cpu", dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[precision]):
            return m(x).float().numpy()


class Semantics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def program(self, name, model, x, dynamic=False, train=False):
        """Exports `model` (in train or eval mode) and saves `x` as probes; returns (model, probes) paths."""
        model.train(train)
        export_to(self.path(name + ".pt2"), model, x, dynamic)
        save_probes(self.path(name + "-p.pt"), x)
        return self.path(name + ".pt2"), self.path(name + "-p.pt")

    def run_program(self, model_path, probes, *extra, mode="eval"):
        return run_json("run", "--model", model_path, "--probes", probes, "--precision", "fp16,bf16", "--outputs",
                        "--seed", SEED, "--mode", mode, *extra)

    # ---- 1. dtype assertions recorded before .float() ------------------------------------
    def test_float_cast_runs_under_autocast(self):
        """h = self.a(x).float(): the export-time dtype assertion is not enforced under autocast
        (it fails every AMP pass otherwise), said in the warnings; outputs bitwise eager."""
        torch.manual_seed(0)
        case = ExportCase(self.tmp.name, "float-cast", FloatCast(), torch.randn(16, 12))
        with open(case.path, "rb") as f:
            self.assertIn(b"_assert_tensor_metadata", f.read(), "the export did not record the assertion this test is about")
        rc, run = case.run()
        self.assertIn(rc, (0, 1), run.get("warnings"))
        for p in ("fp32", "fp16", "bf16"):
            self.assertTrue(bits_equal(outputs_of(run, p), case.eager(p)), p)
        self.assertTrue(any("_assert_tensor_metadata" in w for w in run["warnings"]), run["warnings"])
        rc, run = case.run("--keep-fp32", "b")  # an FP32 region after the assertion
        for p in ("fp16", "bf16"):
            self.assertTrue(bits_equal(outputs_of(run, p), case.eager(p, keep_fp32=("b",))), p)

    def test_dtype_assertion_still_holds_in_fp32(self):
        """The FP32 pass still enforces the recorded dtype: an assertion edited to float64 fails there."""
        torch.manual_seed(0)
        src, probes = self.program("assert64", FloatCast(), torch.randn(8, 12))

        def change(j):
            node = next(n for n in graph_nodes(j) if "_assert_tensor_metadata" in n["target"])
            next(i for i in node["inputs"] if i["name"] == "dtype")["arg"] = {"as_scalar_type": 8}  # float64
        dst = self.path("assert64-edited.pt2")
        rewrite(src, dst, edit_json("models/model.json", change))
        with self.assertRaises(RuntimeError) as e:  # eager: the same assertion on a float32 tensor
            torch.ops.aten._assert_tensor_metadata(torch.zeros(2), dtype=torch.float64)
        rc, out, err = run_cli("run", "--model", dst, "--probes", probes, "--precision", "bf16", "-q")
        self.assertEqual(rc, 3, err)
        self.assertIn(str(e.exception).split("!")[0], err)

    # ---- 2. train/eval as eager model.train()/eval() -------------------------------------
    def test_batchnorm_without_running_stats_in_eval(self):
        """BatchNorm1d(track_running_stats=False) uses batch statistics in eval mode too."""
        torch.manual_seed(0)
        case = ExportCase(self.tmp.name, "no-stats", NoRunningStats(), torch.randn(16, 12) * 2)
        rc, run = case.run()
        self.assertIn(rc, (0, 1))
        for p in ("fp32", "fp16", "bf16"):
            self.assertTrue(bits_equal(outputs_of(run, p), case.eager(p)), p)

    def test_functional_literal_flags_are_kept(self):
        """F.batch_norm(training=False) and F.dropout(training=True) are what eager runs in either mode."""
        torch.manual_seed(0)
        model, x = FixedFlags(), torch.randn(16, 12)
        path, probes = self.program("fixed", model, x)
        for mode in ("eval", "train"):
            rc, run = self.run_program(path, probes, "--batch-size", 16, mode=mode)
            self.assertIn(rc, (0, 1), mode)
            for p in ("fp32", "bf16"):
                want = eager_out(model, x, p, train=mode == "train")
                self.assertTrue(bits_equal(outputs_of(run, p), want), f"{mode} {p}")
        with torch.no_grad():  # the oracle separates the cases: flipping either flag changes the output
            torch.manual_seed(SEED)
            flipped = model.b(F.batch_norm(model.a(x), model.rm.clone(), model.rv.clone(), training=True)).numpy()
        self.assertFalse(bits_equal(flipped, eager_out(model, x)))

    def test_module_flags_follow_the_mode(self):
        """Exported in eval mode, run in train mode: BatchNorm's batch statistics and Dropout on, as
        eager .train(); and the run says that the program was exported in the other mode."""
        torch.manual_seed(0)
        model, x = Driven(), torch.randn(16, 12)
        path, probes = self.program("driven", model, x, dynamic=True)
        rc, run = self.run_program(path, probes, "--batch-size", 8, mode="train")
        self.assertIn(rc, (0, 1))
        for p in ("fp32", "bf16"):
            m = copy.deepcopy(model).train()
            torch.manual_seed(SEED)
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=p == "bf16"):
                want = torch.cat([m(x[:8]), m(x[8:])]).float().numpy()
            self.assertTrue(bits_equal(outputs_of(run, p), want), p)
        self.assertTrue(any("exported in eval mode" in w for w in run["warnings"]), run["warnings"])
        rc, run = self.run_program(path, probes, "--batch-size", 8, mode="eval")
        self.assertFalse(any("exported in" in w and "mode" in w for w in run["warnings"]), run["warnings"])

    def test_exported_in_train_run_in_eval_is_said(self):
        torch.manual_seed(0)
        path, probes = self.program("driven-train", Driven(), torch.randn(16, 12), dynamic=True, train=True)
        rc, run = self.run_program(path, probes, "--batch-size", 8, mode="eval")
        self.assertTrue(any("exported in train mode" in w for w in run["warnings"]), run["warnings"])

    def test_one_value_per_channel_in_train_raises(self):
        """Train mode, one sample a batch: eager BatchNorm raises; so must the program (was a silent accept)."""
        torch.manual_seed(0)
        model, x = Driven(), torch.randn(4, 12)
        path, probes = self.program("bn-one", model, x, dynamic=True)
        with self.assertRaises(ValueError) as e:
            copy.deepcopy(model).train()(x[:1])
        want = str(e.exception).split(",")[0]
        self.assertIn("Expected more than 1 value per channel when training", want)
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--mode", "train", "--batch-size", 1, "-q")
        self.assertEqual(rc, 3, err)
        self.assertIn(want, err)
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--mode", "eval", "--batch-size", 1, "-q")
        self.assertIn(rc, (0, 1), err)

    # ---- 3. requires_grad ------------------------------------------------------------------
    def test_frozen_parameters_are_not_trained(self):
        """A frozen first layer: the losses of 4 SGD steps and the gradient norm (over the trainable
        parameters) equal eager training of the same module."""
        torch.manual_seed(0)
        net = Driven()
        net.a.requires_grad_(False)
        net.drop.p = 0.0
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(32, 12, generator=g), torch.randint(0, 3, (32,), generator=g)
        model, data = self.path("frozen.pt2"), self.path("frozen-data.pt")
        export_to(model, net.train(), x[:8], dynamic=True)
        torch.save({"inputs": x, "labels": y}, data)
        steps, lr = 4, 0.5
        rc, out, err = run_cli("train", "--model", model, "--data", data, "--steps", steps, "--batch-size", 8, "--lr", lr,
                               "--precision", "bf16", "--device", "cpu", "--json", "-", "-q")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)["steps"]
        ref, amp = copy.deepcopy(net).train(), copy.deepcopy(net).train()
        opt_r = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=lr)
        opt_a = torch.optim.SGD([p for p in amp.parameters() if p.requires_grad], lr=lr)
        for step in range(steps):
            xb, yb = x[step * 8:(step + 1) * 8], y[step * 8:(step + 1) * 8]
            opt_r.zero_grad()
            opt_a.zero_grad()
            loss_r = F.cross_entropy(ref(xb), yb)
            loss_r.backward()
            opt_r.step()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss_a = F.cross_entropy(amp(xb), yb)
            loss_a.backward()
            norm = math.sqrt(sum(p.grad.double().pow(2).sum().item() for p in amp.parameters() if p.requires_grad))
            opt_a.step()
            self.assertEqual(as_float(got[step]["loss_ref"]), loss_r.item(), f"step {step}")
            self.assertAlmostEqual(as_float(got[step]["grad_norm"]) / norm, 1.0, places=5, msg=f"step {step}")

    def test_every_parameter_frozen_is_refused(self):
        torch.manual_seed(0)
        net = Driven().requires_grad_(False)
        with self.assertRaises(ValueError) as e:
            torch.optim.SGD([p for p in net.parameters() if p.requires_grad])
        x = torch.randn(16, 12)
        model, data = self.path("all-frozen.pt2"), self.path("all-frozen-data.pt")
        export_to(model, net.train(), x[:8], dynamic=True)
        torch.save({"inputs": x, "labels": torch.zeros(16, dtype=torch.long)}, data)
        rc, out, err = run_cli("train", "--model", model, "--data", data, "--steps", 2, "--batch-size", 8, "--json", "-", "-q")
        self.assertIn(rc, (2, 3), err)
        self.assertIn(str(e.exception), err)

    # ---- 4. weights against the graph's metadata, None outputs ----------------------------
    def test_damaged_weights_config_is_refused_at_load(self):
        torch.manual_seed(0)
        src, probes = self.program("weights", FloatCast(), torch.randn(4, 12))
        damages = {
            "dtype": lambda m: m.update(dtype=6),  # float16: the record still holds enough bytes
            "rank": lambda m: m.update(sizes=[{"as_int": 192}], strides=[{"as_int": 1}]),
            "size": lambda m: m.update(sizes=[{"as_int": 12}, {"as_int": 16}], strides=[{"as_int": 16}, {"as_int": 1}]),
        }
        for what, damage in damages.items():
            dst = self.path(f"weights-{what}.pt2")
            rewrite(src, dst, edit_json("weights_config.json", lambda j: damage(j["config"]["a.weight"]["tensor_meta"])))
            rc, out, err = run_cli("run", "--model", dst, "--probes", probes, "-q")
            self.assertEqual(rc, 2, f"{what}: {err}")
            self.assertIn(dst, err, what)
            self.assertIn("a.weight", err, what)

    def test_output_naming_none_is_refused(self):
        class WithNone(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(12, 3)

            def forward(self, x):
                return self.a(x), None

        path, probes = self.program("with-none", WithNone(), torch.randn(4, 12))
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--output", "1", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("--output", err)
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--output", "0", "-q")
        self.assertIn(rc, (0, 1), err)

    # ---- 5. static-batch padding ----------------------------------------------------------
    def test_padding_rows_are_not_origins_nor_counted(self):
        """Static batch 4, 11 samples: the last batch is 3 real rows and one copy. Only the sample
        that overflows is an origin, and the statistics count 11 rows, not 12."""
        torch.manual_seed(0)
        model = Planted().eval()
        x = torch.rand(11, 12) * 0.01
        x[8, 0] = 40.0  # the first row of the padded batch overflows FP16 in `big`
        export_to(self.path("planted.pt2"), model, x[:4])
        save_probes(self.path("planted-p.pt"), x)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            big = model.big(model.inp(x))
        rows = [f"s{i}" for i in torch.nonzero(~torch.isfinite(big).all(1)).flatten().tolist()]
        self.assertEqual(rows, ["s8"])
        rc, run = run_json("run", "--model", self.path("planted.pt2"), "--probes", self.path("planted-p.pt"),
                           "--precision", "fp16", "--batch-size", 4)
        p = pass_of(run, "fp16")
        self.assertEqual(p["origin"]["module"], "big")
        self.assertEqual(p["origin"]["samples"], rows)
        layer = next(l for l in p["layers"] if l["module"] == "big" and l["op"] == "aten::linear")
        self.assertEqual(layer["count"], big.numel())

    # ---- 6. the placeholder module path ---------------------------------------------------
    def test_placeholder_is_not_a_module(self):
        torch.manual_seed(0)
        model = PlantedDynamic().eval()
        x = torch.rand(8, 12) * 0.01
        x[3, 0] = 40.0
        path, probes = self.program("placeholder", model, x, dynamic=True)
        with open(path, "rb") as f:
            self.assertTrue(PLACEHOLDER.encode() in f.read(), "the export did not write the placeholder this test is about")
        db = self.path("placeholder.sqlite")  # the module list the run records (the GUI's region picker reads it)
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--precision", "fp16", "--db", db, "-q")
        self.assertIn(rc, (0, 1), err)
        with sqlite3.connect(db) as con:
            stored = " ".join(str(row) for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                              for row in con.execute(f'SELECT * FROM "{t}"'))
        self.assertIn('"big"', stored)
        self.assertFalse(PLACEHOLDER in stored, "the placeholder is recorded as a module of the run")
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "--keep-fp32", PLACEHOLDER, "-q")
        self.assertEqual(rc, 2, err)
        rc, out, err = run_cli("advise", "--model", path, "--probes", probes, "--precision", "fp16", "--json", "-", "-q")
        self.assertIn(rc, (0, 1), err)
        self.assertFalse(PLACEHOLDER in out, "the placeholder is an advisor candidate")
        self.assertIn("big", json.loads(out)["candidates"])

    # ---- 7. symbolic shapes and input dtypes ----------------------------------------------
    def test_float_operands_of_symbolic_ops(self):
        """n / 4, sym_float(n) * 0.25, (n // 2) * 0.5, n * 0.5 with n the batch size: Python
        semantics (floats are not truncated); batches of 5, 5 and 3."""
        torch.manual_seed(0)
        model, x = SymFloat(), torch.randn(13, 6)
        path, probes = self.program("symfloat", model, x[:4], dynamic=True)
        save_probes(probes, x)
        rc, run = self.run_program(path, probes, "--batch-size", 5)
        self.assertIn(rc, (0, 1))
        for p in ("fp32", "fp16", "bf16"):
            # each batch a fresh copy, as ampscope gives the model (a view's alignment changes the GEMM's last bit)
            want = np.concatenate([eager_out(model, x[b:b + 5].clone(), p) for b in range(0, 13, 5)])
            self.assertTrue(bits_equal(outputs_of(run, p), want), p)

    def test_input_dtype_is_checked_before_any_pass(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 3)).double()
        path, probes = self.program("double-input", model, torch.randn(4, 12, dtype=torch.float64))
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("'input'", err)  # nn.Sequential's forward argument
        self.assertIn("float64", err)


if __name__ == "__main__":
    unittest.main()
