# SPDX-License-Identifier: MIT
"""GEMMs with an empty dimension under every FP8 recipe (issue 30): a linear layer with no input
features (K = 0: its output is its bias) or no output features (N = 0) ran in BF16 and FP32 but
failed every FP8 pass and the nvfp4 / fp8-delayed training step with exit 3 ("cannot reshape tensor
of 0 elements into shape [-1, 0]"). Now `run` compares them (the scores within the model's usual
FP8 deltas) and `train` trains them.

torchao's own casts refuse an empty operand (max() of no elements), so a torchao job leaves such a
layer unconverted (module_filter_fn): the oracle for fp8 and fp8-rowwise is torchao with `a` left
in BF16 autocast, outputs bitwise and, for fp8, the training losses."""
import copy
import dataclasses
import json
import os
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, ce_step, comparison_of, file_order_batches, pass_of, run_cli, run_json

warnings.filterwarnings("ignore")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402

RECIPES = ("fp8", "fp8-rowwise", "fp8-delayed", "mxfp8", "nvfp4")


class KZero(torch.nn.Module):
    """b(x) + a(x[:, :0]): a is Linear(0, 10), its output its bias (set: PyTorch initializes a
    bias of no input features to zeros, which would not tell a dropped bias)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.b = torch.nn.Linear(32, 10)
        self.a = torch.nn.Linear(0, 10)
        with torch.no_grad():
            self.a.bias.copy_(torch.randn(10) * 3)

    def forward(self, x):
        return self.b(x) + self.a(x[:, :0])


class NZero(torch.nn.Module):
    """cat(b(x), a(x)): a is Linear(32, 0), its output [batch, 0] (another shape changes the scores')."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.a = torch.nn.Linear(32, 0)
        self.b = torch.nn.Linear(32, 10)

    def forward(self, x):
        return torch.cat([self.b(x), self.a(x)], -1)


class EmptyGemms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.models = {}
        for name, net in (("k0", KZero()), ("n0", NZero())):
            cls.models[name] = os.path.join(cls.tmp.name, name + ".pt")
            torch.jit.script(net.train()).save(cls.models[name])
        g = torch.Generator().manual_seed(5)
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        cls.nets, cls.x, cls.y = {"k0": KZero(), "n0": NZero()}, x, y
        cls.probes = os.path.join(cls.tmp.name, "probes.pt")
        torch.save({"inputs": x[:8], "labels": y[:8]}, cls.probes)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": x, "labels": y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_run_compares_every_recipe(self):
        for name, path in self.models.items():
            for extra in ((), ("--fp8-all-gemms",), ("--fp8-real-gemm", "on")):
                rc, run = run_json("run", "--model", path, "--probes", self.probes, "--precision", ",".join(RECIPES),
                                   "--no-db", *extra)
                self.assertIn(rc, (0, 1), (name, extra))
                for recipe in RECIPES:
                    c = comparison_of(run, recipe)
                    self.assertLess(as_float(c["max_abs_delta"]), 1.0, (name, extra, recipe))

    @staticmethod
    def torchao(net, recipe):
        """`net` as torchao converts it for `recipe` (fp8: tensorwise, fp8-rowwise), `a` left out."""
        cfg = Float8LinearConfig(emulate=True) if recipe == "fp8" else dataclasses.replace(
            Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
        return convert_to_float8_training(copy.deepcopy(net), config=cfg, module_filter_fn=lambda mod, fqn: fqn != "a")

    def test_outputs_bitwise_as_torchao(self):
        for name, path in self.models.items():
            rc, run = run_json("run", "--model", path, "--probes", self.probes, "--precision", "fp8,fp8-rowwise",
                               "--outputs", "--no-db")
            self.assertIn(rc, (0, 1), name)
            for recipe in ("fp8", "fp8-rowwise"):
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                    want = self.torchao(self.nets[name].eval(), recipe)(self.x[:8]).float().numpy()
                got = np.array([[as_float(v) for v in r] for r in pass_of(run, recipe)["outputs"]], dtype=np.float32)
                self.assertEqual(got.shape, want.shape, (name, recipe))
                self.assertTrue(np.array_equal(got.view(np.int32), want.view(np.int32)),
                                f"{name} {recipe}: max |diff| {np.abs(got - want).max()}")

    def test_fp8_training_losses_as_torchao(self):
        for name, path in self.models.items():
            m = self.torchao(self.nets[name].train(), "fp8")
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            want = [ce_step(m, opt, x, y) for x, y in file_order_batches(self.x, self.y, 3, 8)]
            out = os.path.join(self.tmp.name, name + "-train.json")
            rc, _, err = run_cli("train", "--model", path, "--data", self.data, "--batch-size", 8, "--steps", 3,
                                 "--lr", 0.1, "--precision", "fp8", "--no-scaler", "--loss", "ce", "--no-db", "-q",
                                 "--json", out)
            self.assertIn(rc, (0, 1), err)
            with open(out) as f:
                got = [as_float(s["loss_amp"]) for s in json.load(f)["steps"]]
            self.assertEqual(got, want, name)

    def test_train_steps_every_recipe(self):
        for name, path in self.models.items():
            for recipe in RECIPES:
                rc, _, err = run_cli("train", "--model", path, "--data", self.data, "--batch-size", 8, "--steps", 2,
                                     "--precision", recipe, "--loss", "ce", "--no-db", "-q")
                self.assertEqual(rc, 0, (name, recipe, err))


if __name__ == "__main__":
    unittest.main()
