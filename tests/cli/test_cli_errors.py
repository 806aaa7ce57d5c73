# SPDX-License-Identifier: MIT
"""Bad input: each case exits 2 with a message naming the file/field and what was expected,
and never crashes (the asan preset runs the same cases)."""
import os
import tempfile
import unittest

import torch

from common import run_cli


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class CliErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = os.path.join(d, "tiny.pt")
        torch.jit.script(Tiny().eval()).save(cls.model)
        with open(cls.model, "rb") as f:
            data = f.read()
        cls.truncated_model = os.path.join(d, "truncated.pt")
        with open(cls.truncated_model, "wb") as f:
            f.write(data[: len(data) // 2])
        cls.text_model = os.path.join(d, "notes.pt")
        with open(cls.text_model, "w") as f:
            f.write("this is not a model\n")
        cls.good_probes = cls.probes("good.pt", {"inputs": torch.randn(6, 4)})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def probes(cls, name, obj):
        path = os.path.join(cls.tmp.name, name)
        torch.save(obj, path)
        return path

    def csv(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def expect_bad_input(self, args, *needles):
        rc, out, err = run_cli("run", *args)
        self.assertEqual(rc, 2, f"args {args}: rc {rc}\nstdout {out}\nstderr {err}")
        for n in needles:
            self.assertIn(n, err, f"args {args}: message lacks {n!r}: {err}")
        self.assertNotIn("Traceback", err)

    def test_missing_model_file(self):
        self.expect_bad_input(["--model", "/no/such/model.pt", "--probes", self.good_probes],
                              "/no/such/model.pt", "file not found")

    def test_not_a_torchscript_file(self):
        self.expect_bad_input(["--model", self.text_model, "--probes", self.good_probes],
                              self.text_model, "TorchScript")

    def test_truncated_model(self):
        self.expect_bad_input(["--model", self.truncated_model, "--probes", self.good_probes],
                              self.truncated_model, "TorchScript")

    def test_truncated_probe_file(self):
        with open(self.good_probes, "rb") as f:
            data = f.read()
        path = os.path.join(self.tmp.name, "cut.pt")
        with open(path, "wb") as f:
            f.write(data[: len(data) // 3])
        self.expect_bad_input(["--model", self.model, "--probes", path], path, "torch.save")

    def test_inputs_missing(self):
        p = self.probes("noinputs.pt", {"labels": torch.zeros(3, dtype=torch.long)})
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "'inputs'", "missing")

    def test_inputs_wrong_rank_for_demo_model(self):
        p = self.probes("rank.pt", {"inputs": torch.randn(5, 4, 8)})
        self.expect_bad_input(["--model", "demo:mlp", "--probes", p], p, "'inputs'", "[N, 32]")

    def test_inputs_wrong_shape_for_torchscript_model(self):
        p = self.probes("shape.pt", {"inputs": torch.randn(5, 7)})
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "'inputs'", "failed on inputs of shape [5, 7]")

    def test_labels_count_mismatch(self):
        p = self.probes("labels.pt", {"inputs": torch.randn(6, 4), "labels": torch.zeros(4, dtype=torch.long)})
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "'labels'", "expected 6")

    def test_duplicate_ids(self):
        p = self.probes("ids.pt", {"inputs": torch.randn(3, 4), "ids": ["a", "b", "a"]})
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "'ids'", "duplicate sample id 'a'")

    def test_non_numeric_csv_cell(self):
        p = self.csv("bad.csv", "id,f0,f1,f2,f3\na,1,2,3,4\nb,1,x2,3,4\n")
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "row 3, column 'f1'", "not a number")

    def test_malformed_csv(self):
        p = self.csv("quote.csv", 'f0,f1,f2,f3\n"1,2,3,4\n')
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "CSV")

    def test_empty_probe_set(self):
        p = self.probes("empty.pt", {"inputs": torch.randn(0, 4)})
        self.expect_bad_input(["--model", self.model, "--probes", p], p, "empty probe set")
        c = self.csv("empty.csv", "f0,f1,f2,f3\n")
        self.expect_bad_input(["--model", self.model, "--probes", c], c, "empty probe set")

    def test_unknown_precision(self):
        self.expect_bad_input(["--model", self.model, "--probes", self.good_probes, "--precision", "fp4"],
                              "--precision", "fp4",
                              "expected fp16, bf16, fp8, fp8-rowwise, mxfp8, nvfp4 and/or fp8-delayed")

    def test_precision_given_twice(self):
        # each AMP pass once: "fp16,fp16" recorded the FP16 pass twice
        self.expect_bad_input(["--model", self.model, "--probes", self.good_probes, "--precision", "fp16,fp16"],
                              "--precision", "'fp16' given twice")
        rc, _, err = run_cli("bench", "--model", self.model, "--probes", self.good_probes, "--precision", "bf16,fp16,bf16",
                               "--db", os.path.join(tempfile.mkdtemp(), "bench.sqlite"))
        self.assertEqual(rc, 2, err)
        self.assertIn("given twice", err)

    def test_cuda_requested_without_cuda(self):
        if torch.cuda.is_available():
            self.skipTest("this machine has CUDA")
        self.expect_bad_input(["--model", self.model, "--probes", self.good_probes, "--device", "cuda"],
                              "--device", "no CUDA")

    def test_bad_criteria_file(self):
        c = self.csv("crit.json", '{"atol": "tiny"}')
        self.expect_bad_input(["--model", self.model, "--probes", self.good_probes, "--criteria", c], c, "'atol'")

    def test_unknown_probe_extension(self):
        c = self.csv("probes.txt", "1 2 3")
        self.expect_bad_input(["--model", self.model, "--probes", c], c, "expected .pt")

    def test_usage_errors_exit_2(self):
        rc, _, err = run_cli("run", "--probes", "demo")
        self.assertEqual(rc, 2)
        self.assertIn("--model", err)
        rc, _, _ = run_cli("frobnicate")
        self.assertEqual(rc, 2)
        # an option replay does not have: named as such, its value not taken for the bundle folder
        # (was: "bundle: Directory does not exist: 4")
        rc, _, err = run_cli("replay", "--model", "demo:mlp", "--checkpoint", "x", "--batch", "y", "--precision",
                             "fp8", "--fp8-amax-history", 4, "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("--fp8-amax-history", err)
        self.assertNotIn("Directory does not exist", err)
        rc, _, err = run_cli("replay", "/no/such/bundle", "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("/no/such/bundle", err)
        self.assertIn("expected an incident bundle folder", err)

    def test_help_and_version(self):
        for cmd in (["--help"], ["run", "--help"], ["backend", "--help"]):
            rc, out, _ = run_cli(*cmd)
            self.assertEqual(rc, 0, cmd)
            self.assertIn("Usage", out)
        rc, out, _ = run_cli("--version")
        self.assertEqual(rc, 0)
        self.assertIn("ampscope-cli", out)

    def test_backend_json(self):
        import json
        rc, out, _ = run_cli("backend", "--json", "--device", "cpu")
        self.assertEqual(rc, 0)
        b = json.loads(out)
        self.assertEqual(b["kind"], "cpu")
        self.assertEqual(b["torch"], torch.__version__.split("+")[0])
        self.assertTrue(b["bf16_supported"])


if __name__ == "__main__":
    unittest.main()
