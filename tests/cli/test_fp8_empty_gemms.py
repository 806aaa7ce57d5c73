# SPDX-License-Identifier: MIT
"""GEMMs with an empty dimension under every FP8 recipe (issue 30): a linear layer with no input
features (K = 0: its output is its bias) or no output features (N = 0) ran in BF16 and FP32 but
failed every FP8 pass and the nvfp4 / fp8-delayed training step with exit 3 ("cannot reshape tensor
of 0 elements into shape [-1, 0]"). Now `run` compares them (the scores within the model's usual
FP8 deltas) and `train` trains them."""
import os
import tempfile
import unittest

import torch

from common import as_float, comparison_of, run_cli, run_json

RECIPES = ("fp8", "fp8-rowwise", "fp8-delayed", "mxfp8", "nvfp4")


class KZero(torch.nn.Module):
    """b(x) + a(x[:, :0]): a is Linear(0, 10), its output its bias."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.b = torch.nn.Linear(32, 10)
        self.a = torch.nn.Linear(0, 10)

    def forward(self, x):
        return self.b(x) + self.a(x[:, :0])


class NZero(torch.nn.Module):
    """b(x) + a(x).sum(-1, keepdim=True): a is Linear(32, 0), its sum 0."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.a = torch.nn.Linear(32, 0)
        self.b = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.b(x) + self.a(x).sum(-1, keepdim=True)


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

    def test_train_steps_every_recipe(self):
        for name, path in self.models.items():
            for recipe in RECIPES:
                rc, _, err = run_cli("train", "--model", path, "--data", self.data, "--batch-size", 8, "--steps", 2,
                                     "--precision", recipe, "--loss", "ce", "--no-db", "-q")
                self.assertEqual(rc, 0, (name, recipe, err))


if __name__ == "__main__":
    unittest.main()
