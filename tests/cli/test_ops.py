# SPDX-License-Identifier: MIT
"""Operator coverage: ampscope's report agrees with what Python torch does with the same op
on the same device: autocast's output dtype, and whether a kernel exists for the dtype."""
import json
import os
import tempfile
import unittest

import torch

from common import run_cli


class WithCdist(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)
        self.head = torch.nn.Linear(5, 2)

    def forward(self, x):
        h = self.fc(x).view(-1, 5, 4)
        d = torch.cdist(h, h)          # autocast: fp32 policy; no Half kernel on CPU
        return self.head(d.sum(1))


class Ops(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "m.pt")
        torch.jit.script(WithCdist().eval()).save(cls.model)
        cls.probes = os.path.join(cls.tmp.name, "p.pt")
        torch.save({"inputs": torch.randn(3, 5, 6)}, cls.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def report(self, precision):
        rc, out, err = run_cli("ops", "--model", self.model, "--probes", self.probes, "--device", "cpu",
                               "--precision", precision, "--json")
        return rc, {o["op"].split(".")[0]: o for o in json.loads(out)["ops"]}

    def python_kernel_ok(self, dtype):
        h = torch.randn(1, 5, 4).to(dtype)
        try:
            torch.cdist(h, h)
            return True
        except Exception:
            return False

    def test_matches_python(self):
        for precision, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            rc, ops = self.report(precision)
            self.assertIn("aten::cdist", ops)
            self.assertIn("aten::linear", ops)
            with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
                h = torch.randn(1, 5, 4).to(dtype)
                auto_dtype = torch.cdist(h, h).dtype
                lin_dtype = torch.nn.functional.linear(torch.randn(2, 6), torch.randn(4, 6)).dtype
            self.assertEqual(ops["aten::cdist"]["autocast_fp32"], auto_dtype == torch.float32, precision)
            self.assertEqual(ops["aten::linear"]["amp_output_dtype"], {torch.float16: "Half", torch.bfloat16: "BFloat16"}[lin_dtype])
            ok = self.python_kernel_ok(dtype)
            self.assertEqual(ops["aten::cdist"]["kernel_ok"], ok, precision)
            if not ok:
                self.assertEqual(rc, 1)
                self.assertTrue(ops["aten::cdist"]["error"])
            self.assertEqual(ops["aten::linear"]["calls"], 2)
            self.assertEqual(sorted(ops["aten::linear"]["modules"]), ["fc", "head"])

    def test_text_output(self):
        rc, out, _ = run_cli("ops", "--model", "demo:mlp", "--device", "cpu")
        self.assertEqual(rc, 0)
        self.assertIn("aten::addmm", out)
        self.assertIn("without a fp16 kernel", out)


if __name__ == "__main__":
    unittest.main()
