# SPDX-License-Identifier: MIT
"""The simulated FP8 pass (`run --precision fp8`, issue 30) against torchao 0.18: the same model
converted with torchao.float8.convert_to_float8_training(Float8LinearConfig(emulate=True)) and run
under torch.autocast("cpu", torch.bfloat16) gives the FP8 pass's outputs bitwise, for TorchScript
and torch.export programs; with --keep-fp32 fc2, torchao leaves fc2 unconverted and it runs as an
FP32 region does (autocast off, input cast to FP32). Decisions and flips are Python's. Commands
that do not simulate FP8 yet refuse it by name."""
import copy
import os
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, comparison_of, near_tie_mlp, pass_of, run_cli, run_json

warnings.filterwarnings("ignore")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402

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


def torchao_fp8(model, x, keep=()):
    m = convert_to_float8_training(copy.deepcopy(model), config=Float8LinearConfig(emulate=True),
                                   module_filter_fn=lambda mod, fqn: fqn not in keep)
    for name in keep:
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


class Fp8Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = near_tie_mlp().eval()
        g = torch.Generator().manual_seed(1)
        cls.x = torch.randn(40, 16, generator=g) * 3
        cls.x[0, 0] = 200.0  # a large input: fc1's E4M3 scale is set by it, the rest lose precision
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

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @staticmethod
    def outputs(result, precision):
        return np.array([[as_float(v) for v in row] for row in pass_of(result, precision)["outputs"]], dtype=np.float32)

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

    def test_decisions_and_flips_as_python(self):
        ref, amp = self.ref.argmax(1), self.want.argmax(1)
        for fmt, result in self.results.items():
            cmp = comparison_of(result, "fp8")
            self.assertEqual(cmp["amp_decisions"], amp.tolist(), fmt)
            self.assertEqual([f["sample"] for f in cmp["flips"]], [f"p{i}" for i in np.nonzero(ref != amp)[0]], fmt)

    def test_other_commands_refuse_fp8_by_name(self):
        d = self.tmp.name
        for args in (("train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--no-db"),
                     ("ops", "--model", "demo:mlp"),
                     ("bench", "--model", self.paths["export"], "--probes", self.probes, "--db", os.path.join(d, "b.sqlite")),
                     ("advise", "--model", self.paths["export"], "--probes", self.probes, "--no-db")):
            rc, _, err = run_cli(*args, "--precision", "fp8")
            self.assertEqual(rc, 2, f"{args[0]}: {err}")
            self.assertIn("fp8 runs with `run` only", err, args[0])


if __name__ == "__main__":
    unittest.main()
