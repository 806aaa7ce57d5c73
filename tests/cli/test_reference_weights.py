# SPDX-License-Identifier: MIT
"""The reference is FP32 only when the weights are: a model saved after .to(torch.bfloat16) (or
.half()) computes its "fp32" pass with BF16 weights, so every comparison against it understates
what mixed precision changes (here: exactly zero difference). run, train and replay must say so,
naming the dtype and the parameters, and say nothing for the same model in float32 (the control).
"""
import json
import os
import tempfile
import unittest

import torch
import torch.nn as nn

from common import run_cli


class CastNet(nn.Module):
    """Casts its float32 input to the weights' dtype, as a model saved in BF16 does, and returns float32."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x.to(self.a.weight.dtype)))).float()


def cli_json(d, *args):
    out = os.path.join(d, "out.json")
    rc, so, se = run_cli(*args, "--json", out, "--force", "-q")
    if rc not in (0, 1):
        raise AssertionError(f"exit {rc}: {se}")
    with open(out) as f:
        return json.load(f)


class LowPrecisionWeights(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.d = cls.tmp.name
        torch.manual_seed(0)
        x = torch.randn(16, 8)
        y = torch.randint(0, 4, (16,))
        torch.save({"inputs": x, "labels": y, "ids": [f"s{i}" for i in range(16)]}, os.path.join(d, "probes.pt"))
        torch.save({"inputs": x, "labels": y}, os.path.join(d, "batch.pt"))
        cls.models = {}
        for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)):
            torch.manual_seed(1)
            m = CastNet().to(dtype)
            # float64 is no lower precision (a rotary table kept in float64): never named
            m.register_buffer("freq", torch.arange(4, dtype=torch.float64))
            path = os.path.join(d, name + ".pt2")
            torch.export.save(torch.export.export(m.train(), (x,)), path)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, os.path.join(d, name + "-ckpt.pt"))
            cls.models[name] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def commands(self, name, *extra, precision="bf16"):
        d, model = self.d, self.models[name]
        db = ["--db", os.path.join(d, "db.sqlite")]
        probes, ckpt = os.path.join(d, "probes.pt"), os.path.join(d, name + "-ckpt.pt")
        return {
            "run": ["run", "--model", model, "--probes", probes, "--precision", "bf16", *db],
            "train": ["train", "--model", model, "--data", probes, "--precision", precision, "--steps", "1",
                      "--batch-size", "16", *db, *extra],
            "advise": ["advise", "--model", model, "--probes", probes, "--precision", "bf16", "--no-bench", *db],
            "replay": ["replay", "--model", model, "--checkpoint", ckpt, "--batch", os.path.join(d, "batch.pt"),
                       "--precision", precision, *extra],
        }

    def weight_warnings(self, js):
        return [w for w in js["warnings"] if "weights are not float32" in w]

    def test_bf16_and_fp16_weights_are_named_in_run_train_and_replay(self):
        for name, dtype, extra in (("bf16", "torch.bfloat16", ()), ("f16", "torch.float16", ("--no-scaler",))):
            for cmd, args in self.commands(name, *extra).items():
                with self.subTest(weights=name, command=cmd):
                    js = cli_json(self.d, *(args if cmd in ("train", "replay") else self.commands(name)[cmd]))
                    said = self.weight_warnings(js)
                    self.assertEqual(len(said), 1, js["warnings"])
                    self.assertIn(f"4 of 5 floating parameters and buffers are {dtype}", said[0])
                    self.assertNotIn("float64", said[0])
                    self.assertIn("a.weight", said[0])
                    self.assertIn("no FP32 reference", said[0])

    def test_fp16_weights_with_a_gradscaler_are_refused_before_any_step(self):
        """PyTorch's GradScaler raises 'Attempting to unscale FP16 gradients.' at the first unscale:
        train and replay refuse it up front (exit 2, naming the model and parameters), not exit 3."""
        for cmd in ("train", "replay"):
            with self.subTest(command=cmd):
                rc, so, se = run_cli(*self.commands("f16", precision="fp16")[cmd], "-q")
                self.assertEqual(rc, 2, se)
                self.assertIn(self.models["f16"], se)
                self.assertIn("4 of 4 trainable parameters are torch.float16 (a.weight", se)
                self.assertIn("--no-scaler", se)

    def test_the_reason_is_real_a_bf16_reference_hides_the_bf16_error(self):
        """The run over BF16 weights finds no difference at all; the same weights in float32 do."""
        low = cli_json(self.d, *self.commands("bf16")["run"])
        full = cli_json(self.d, *self.commands("f32")["run"])
        delta = lambda js: js["comparisons"][0]["max_abs_delta"]
        self.assertEqual(delta(low), 0)
        self.assertGreater(delta(full), 0)

    def test_float32_weights_say_nothing(self):
        for cmd, args in self.commands("f32").items():
            with self.subTest(command=cmd):
                js = cli_json(self.d, *args)
                self.assertEqual(self.weight_warnings(js), [], js["warnings"])


if __name__ == "__main__":
    unittest.main()
