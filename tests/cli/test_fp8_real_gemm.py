# SPDX-License-Identifier: MIT
"""Real FP8 GEMMs beside the simulated ones (`run --fp8-real-gemm`, issue 30), against torchao 0.18
in Python torch from the same wheel: Float8Linear without emulate runs torch._scaled_mm on the
FP8 operands, which PyTorch's CPU backend has for tensorwise scales. The fp8 pass stays the
simulated one (torchao's emulate=True, bitwise) and its real_gemm holds the outputs of the real
GEMMs (torchao's emulate=False, bitwise), with how many scores and decisions differ between the
two. Applying the scales after the FP8 product (the real kernel) rounds a few dozen of the wide
layer's scores differently from dividing each operand first (the emulation), so the oracle tells
the two apart. fp8-rowwise has no
CPU kernel: the run says so, and runs on. On a CUDA GPU with FP8 (compute capability >= 8.9;
AMPSCOPE_TEST_DEVICE=cuda, run by tools/gpu-check.sh) the check is on by default and fp8-rowwise
runs too, against torchao's rowwise recipe without emulate."""
import copy
import json
import os
import re
import sqlite3
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, pass_of, run_cli, run_json

warnings.filterwarnings("ignore")
import dataclasses  # noqa: E402

from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402

DEVICE = os.environ.get("AMPSCOPE_TEST_DEVICE", "cpu")
CUDA = DEVICE.startswith("cuda")


class Wide(torch.nn.Module):
    """One wide linear layer (768 -> 4096) and a GELU: 128 x 4096 scores, of which some dozens
    round to another BF16 value when the scales multiply the FP8 product (the real kernel) than
    when they divide each operand first (the emulation)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(768, 4096)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


def torchao_outputs(model, x, emulate, recipe="fp8"):
    cfg = Float8LinearConfig() if recipe == "fp8" else Float8LinearConfig.from_recipe_name("rowwise")
    m = convert_to_float8_training(copy.deepcopy(model).to(DEVICE), config=dataclasses.replace(cfg, emulate=emulate))
    with torch.no_grad(), torch.autocast(DEVICE.split(":")[0], dtype=torch.bfloat16):
        return m(x.to(DEVICE)).float().cpu().numpy()


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.int32)


class Fp8RealGemm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(4)
        cls.model = Wide().eval()
        g = torch.Generator().manual_seed(9)
        cls.x = torch.randn(128, 768, generator=g) * 3
        cls.paths = {"torchscript": os.path.join(cls.tmp.name, "m.pt"), "export": os.path.join(cls.tmp.name, "m.pt2")}
        torch.jit.script(cls.model).save(cls.paths["torchscript"])
        torch.export.save(torch.export.export(cls.model, (cls.x,)), cls.paths["export"])
        with torch.no_grad():
            ref = cls.model(cls.x)
        cls.probes = os.path.join(cls.tmp.name, "probes.pt")
        torch.save({"inputs": cls.x, "labels": ref.argmax(1)}, cls.probes)
        # one batch of 128 (--batch-size 128; the export's static batch): one tensorwise scale per operand
        cls.sim = torchao_outputs(cls.model, cls.x, emulate=True)
        cls.real = torchao_outputs(cls.model, cls.x, emulate=False)
        if CUDA:  # the GPU's kernel takes rowwise scales too
            cls.rowwise_real = torchao_outputs(cls.model, cls.x, emulate=False, recipe="fp8-rowwise")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_fp8(self, path, *extra):
        return run_json("run", "--model", path, "--probes", self.probes, "--precision", "fp8,fp8-rowwise",
                        "--batch-size", 128, "--outputs", "--device", DEVICE, "--no-db", *extra)[1]

    def test_real_gemms_as_torchao_without_emulate(self):
        """The real kernel multiplies the scales into the FP8 product, the emulation divides each
        operand by its scale first: on this CPU some dozens of the 524288 scores round to another
        BF16 value, so scores equal to torchao's real ones (and `differing` equal to that count)
        tell the real GEMMs from the emulation. (A backend whose kernel dequantized first would give
        0 differing scores; the checks below still hold there.)"""
        differ = int((bits(self.sim) != bits(self.real)).sum())
        if DEVICE == "cpu":  # here the oracle separates them: scales multiplied in after the product
            self.assertGreater(differ, 0, "torchao's real and emulated GEMMs give the same scores")
        for fmt, path in self.paths.items():
            got = self.run_fp8(path, "--fp8-real-gemm", "on")
            fp8 = pass_of(got, "fp8")
            self.assertTrue(np.array_equal(bits([[as_float(v) for v in r] for r in fp8["outputs"]]), bits(self.sim)),
                            f"{fmt}: the pass itself stays simulated")
            g = fp8["real_gemm"]
            self.assertTrue(g["ran"], fmt)
            self.assertTrue(g["kernel"].startswith("aten::_scaled_mm on " + DEVICE), g["kernel"])
            real = np.array([[as_float(v) for v in r] for r in g["outputs"]], dtype=np.float32)
            self.assertTrue(np.array_equal(bits(real), bits(self.real)), f"{fmt}: real GEMMs as torchao's")
            self.assertEqual(g["differing"], differ, fmt)
            self.assertEqual(g["max_abs_diff"], float(np.abs(self.sim - self.real).max()), fmt)
            want_dec = int((self.sim.argmax(1) != self.real.argmax(1)).sum())
            self.assertEqual(g["decisions_differ"], want_dec, fmt)
            # ampscope's FP32 reference runs on the device too: a near tie must break as it does there
            with torch.no_grad():
                ref = copy.deepcopy(self.model).to(DEVICE)(self.x.to(DEVICE)).cpu().numpy().argmax(1)
            self.assertEqual(g["flips"], int((self.real.argmax(1) != ref).sum()), fmt)
            rowwise = pass_of(got, "fp8-rowwise")["real_gemm"]
            if CUDA:
                rreal = np.array([[as_float(v) for v in r] for r in rowwise["outputs"]], dtype=np.float32)
                self.assertTrue(np.array_equal(bits(rreal), bits(self.rowwise_real)), f"{fmt}: rowwise real GEMMs")
                continue
            self.assertFalse(rowwise["ran"])
            self.assertIn("tensorwise scales only", rowwise["reason"])
            self.assertNotIn("outputs", rowwise)
            self.assertTrue(any("fp8-rowwise: real FP8 GEMMs not run" in w for w in got["warnings"]), got["warnings"])

    def test_auto_is_off_on_the_cpu_and_off_is_off(self):
        for flag in ((), ("--fp8-real-gemm", "off")):
            got = self.run_fp8(self.paths["export"], *flag)
            self.assertEqual("real_gemm" in pass_of(got, "fp8"), CUDA and not flag, flag)  # auto: on an FP8 GPU
            self.assertEqual(got.get("fp8_real_gemm"), flag[1] if flag else None)

    def test_recorded_and_shown(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "runs.sqlite")
            rc, so, se = run_cli("run", "--model", self.paths["export"], "--probes", self.probes, "--precision",
                                 "fp8,fp8-rowwise", "--fp8-real-gemm", "on", "--device", DEVICE, "--db", db)
            self.assertIn(rc, (0, 1), se)
            self.assertIn("the pass is simulated", so)
            self.assertIn("real FP8 GEMMs (aten::_scaled_mm on " + DEVICE, so)
            uuid = re.search(r"^run ([0-9a-f-]{36})", so, re.M).group(1)
            rc, so, se = run_cli("show", uuid, "--db", db, "--json", "--outputs")
            self.assertEqual(rc, 0, se)
            shown = json.loads(so)
            self.assertEqual(shown["fp8_real_gemm"], "on")
            g = pass_of(shown, "fp8")["real_gemm"]
            real = np.array([[as_float(v) for v in r] for r in g["outputs"]], dtype=np.float32)
            self.assertTrue(np.array_equal(bits(real), bits(self.real)))
            rowwise = pass_of(shown, "fp8-rowwise")["real_gemm"]  # a check that did not run is recorded too
            self.assertEqual(rowwise["ran"], CUDA)
            if not CUDA:
                self.assertIn("tensorwise scales only", rowwise["reason"])
            rc, so, _ = run_cli("show", uuid, "--db", db)
            self.assertIn("real FP8 GEMMs (aten::_scaled_mm on " + DEVICE, so)
            # a stored setting outside the vocabulary is refused by name, and a damaged count too
            con = sqlite3.connect(db)
            con.execute("DROP TRIGGER runs_criteria_immutable")
            (header,), = con.execute("SELECT header_json FROM runs").fetchall()
            h = json.loads(header)
            h["spec"]["fp8_real_gemm"] = "yes"
            con.execute("UPDATE runs SET header_json=?", (json.dumps(h),))
            con.commit()
            con.close()
            rc, _, se = run_cli("show", uuid, "--db", db)
            self.assertEqual(rc, 2, se)
            self.assertIn("spec.fp8_real_gemm", se)
            self.assertIn("'yes'; expected auto, on or off", se)
            con = sqlite3.connect(db)
            con.execute("UPDATE runs SET header_json=?", (header,))
            con.execute("UPDATE fp8_real_gemm SET differing=-3")
            con.commit()
            con.close()
            rc, _, se = run_cli("show", uuid, "--db", db)
            self.assertEqual(rc, 2, se)
            self.assertIn("fp8_real_gemm.differing", se)

    def test_on_without_an_fp8_pass_is_refused(self):
        rc, _, se = run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--precision", "bf16", "--fp8-real-gemm",
                            "on", "--no-db")
        self.assertEqual(rc, 2, se)
        self.assertIn("--fp8-real-gemm", se)
        self.assertIn("on applies to fp8 and fp8-rowwise passes", se)


if __name__ == "__main__":
    unittest.main()
