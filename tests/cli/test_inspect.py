# SPDX-License-Identifier: MIT
"""Where NaN/Inf is born, for TorchScript models written here by Python torch: ampscope must
name the module Python's named_modules() gives (found here with forward hooks on the eager
model) and the ATen op; FP32 regions must equal Python's autocast(enabled=False) + casts."""
import math
import os
import tempfile
import unittest

import numpy as np
import torch

from common import as_float, pass_of, run_json


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = x + b(x)
        return self.head(x)


def first_nonfinite_module(model, x, dtype):
    """Python's own answer: the first leaf module (execution order) with a non-finite output
    whose input was finite."""
    found = []

    def hook(name):
        def f(mod, inp, out):
            if not found and not torch.isfinite(out).all() and all(torch.isfinite(i).all() for i in inp):
                found.append(name)
        return f

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if not list(m.children())]
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        model(x)
    for h in handles:
        h.remove()
    return found[0] if found else None


def keep_fp32(model, names):
    """Eager equivalent of --keep-fp32: autocast off inside the module, floating input as FP32."""
    for n in names:
        mod = model.get_submodule(n)
        orig = mod.forward

        def fwd(x, orig=orig):
            with torch.autocast("cpu", enabled=False):
                return orig(x.float())
        mod.forward = fwd


class InspectTorchScript(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(1)
        cls.tmp = tempfile.TemporaryDirectory()
        net = Net().eval()
        with torch.no_grad():
            net.blocks[1].up.weight.mul_(2000.0)  # the known overflow point in FP16
        g = torch.Generator().manual_seed(5)
        x = torch.randn(12, 4, generator=g)
        x[8:] *= 60.0  # edge rows
        cls.x, cls.net = x, net
        cls.ids = [f"s{i}" for i in range(12)]
        cls.probes = os.path.join(cls.tmp.name, "probes.pt")
        torch.save({"inputs": x, "ids": cls.ids, "tags": ["ordinary"] * 8 + ["edge"] * 4}, cls.probes)
        cls.scripted = os.path.join(cls.tmp.name, "scripted.pt")
        torch.jit.script(net).save(cls.scripted)
        cls.traced = os.path.join(cls.tmp.name, "traced.pt")
        torch.jit.trace(net, x[:2]).save(cls.traced)
        with torch.no_grad():
            assert torch.isfinite(net(x)).all()
            with torch.autocast("cpu", dtype=torch.float16):
                y = net(x)
        cls.nonfinite_fp16 = [cls.ids[i] for i in range(12) if not torch.isfinite(y[i]).all()]
        cls.origin_module = first_nonfinite_module(net, x, torch.float16)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_fixture_has_a_known_overflow(self):
        self.assertEqual(self.origin_module, "blocks.1.up")
        self.assertTrue(self.nonfinite_fp16)

    def check_origin(self, model_path):
        rc, r = run_json("run", "--model", model_path, "--probes", self.probes, "--device", "cpu")
        self.assertEqual(rc, 1)
        fp16 = pass_of(r, "fp16")
        self.assertEqual(fp16["nonfinite_samples"], self.nonfinite_fp16)
        self.assertEqual(fp16["origin"]["module"], self.origin_module)
        self.assertEqual(fp16["origin"]["op"], "aten::linear")
        self.assertEqual(fp16["origin"]["samples"], self.nonfinite_fp16)
        self.assertIsNone(pass_of(r, "bf16")["origin"])
        modules = {l["module"] for l in pass_of(r, "fp32")["layers"]}
        self.assertTrue({"embed", "blocks.0.up", "blocks.0.act", "blocks.1.down", "head"} <= modules, modules)
        # headroom: the fp32 pass shows blocks.1.up above the FP16 limit for the edge rows
        up = [l for l in pass_of(r, "fp32")["layers"] if l["module"] == "blocks.1.up"][0]
        self.assertGreater(up["fp16_overflow"], 0)
        self.assertGreater(as_float(up["absmax"]), 65504)

    def test_scripted_origin_matches_named_modules(self):
        self.check_origin(self.scripted)

    def test_traced_origin_matches_named_modules(self):
        self.check_origin(self.traced)

    def test_keep_fp32_equals_python_autocast_disabled(self):
        regions = ["blocks.1", "head"]
        args = []
        for g in regions:
            args += ["--keep-fp32", g]
        rc, r = run_json("run", "--model", self.scripted, "--probes", self.probes, "--device", "cpu",
                         "--precision", "fp16", "--outputs", "--batch-size", "64", *args)
        fp16 = pass_of(r, "fp16")
        self.assertEqual(fp16["keep_fp32"], regions)
        self.assertEqual(fp16["nonfinite_samples"], [])
        self.assertIsNone(fp16["origin"])
        net = Net().eval()
        net.load_state_dict(self.net.state_dict())
        keep_fp32(net, regions)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            want = net(self.x).float().numpy()
        got = np.array([[as_float(v) for v in row] for row in fp16["outputs"]], dtype=np.float32)
        self.assertTrue(np.array_equal(got.view(np.int32), want.view(np.int32)),
                        f"max diff {np.abs(got - want).max()}")
        for l in fp16["layers"]:
            if l["module"].startswith("blocks.1.") or l["module"] == "head":
                self.assertFalse(l["autocast"], l)
                self.assertEqual(l["dtype"], "Float", l)



class LogNet(torch.nn.Module):
    """Non-finite in FP32 already for negative inputs: log."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.log(x))


class BrokenReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "log.pt")
        torch.jit.script(LogNet().eval()).save(cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_nonfinite_reference_is_reported_not_trusted(self):
        x = torch.rand(6, 4) + 0.5
        x[2, 1] = -1.0  # log(-1) = NaN in FP32 too
        p = os.path.join(self.tmp.name, "p.pt")
        torch.save({"inputs": x, "ids": [f"q{i}" for i in range(6)]}, p)
        rc, r = run_json("run", "--model", self.model, "--probes", p, "--device", "cpu")
        self.assertEqual(rc, 1)
        self.assertEqual(r["verdict"], "invalid_reference")
        ref = pass_of(r, "fp32")
        self.assertEqual(ref["nonfinite_samples"], ["q2"])
        self.assertEqual(ref["origin"]["op"], "aten::log")
        self.assertEqual(ref["origin"]["samples"], ["q2"])
        self.assertEqual(r["comparisons"], [])  # nothing compared against a broken reference
        self.assertEqual(len(r["passes"]), 1)

    def test_nonfinite_probe_is_stage_input(self):
        x = torch.rand(4, 4) + 0.5
        x[1, 0] = float("nan")
        p = os.path.join(self.tmp.name, "nan.pt")
        torch.save({"inputs": x}, p)
        rc, r = run_json("run", "--model", self.model, "--probes", p, "--device", "cpu")
        self.assertEqual(r["verdict"], "invalid_reference")
        self.assertEqual(pass_of(r, "fp32")["origin"]["stage"], "input")
        self.assertEqual(pass_of(r, "fp32")["origin"]["samples"], ["1"])


if __name__ == "__main__":
    unittest.main()
