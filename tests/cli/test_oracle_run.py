# SPDX-License-Identifier: MIT
"""Oracle: Python torch (same wheel) runs the same TorchScript model on the same probe file
under torch.autocast("cpu", dtype=...) and ampscope-cli must report the same outputs
(bitwise: the op sequence is the same TorchScript graph on the same kernels) and exactly the
same decisions and flips.

Python runs the scripted model with torch.jit.optimized_execution(False), as ampscope does:
the optimizing executor bakes the autocast state of its first optimized call into its cached
plan, so its results depend on the order of the passes (test_optimizing_executor_is_order_
dependent shows it). Unoptimized execution applies the dispatcher's per-op autocast policy on
every call and equals the eager module bitwise (checked too)."""
import os
import tempfile
import unittest

import numpy as np
import torch

DEVICE = os.environ.get("AMPSCOPE_TEST_DEVICE", "cpu")

from common import as_float, comparison_of, near_tie_mlp, pass_of, run_json


def near_tie_probes(model, n_ordinary=20, n_boundary=12, seed=3):
    g = torch.Generator().manual_seed(seed)
    xs, tags = [torch.randn(n_ordinary, 16, generator=g)], ["ordinary"] * n_ordinary
    made = 0
    with torch.no_grad():
        while made < n_boundary:
            a, b = torch.randn(1, 16, generator=g), torch.randn(1, 16, generator=g)
            ca, cb = model(a).argmax(1).item(), model(b).argmax(1).item()
            if ca == cb:
                continue
            lo, hi = a, b
            for _ in range(60):
                mid = (lo + hi) / 2
                y = model(mid)
                top = y.topk(2, 1).values[0]
                if 0 < (top[0] - top[1]).item() < 2e-5:
                    break
                if y.argmax(1).item() == ca:
                    lo = mid
                else:
                    hi = mid
            xs.append(mid)
            tags.append("boundary")
            made += 1
    return torch.cat(xs), tags


class OracleRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tmp = tempfile.TemporaryDirectory()
        eager = near_tie_mlp().eval()
        cls.scripted = torch.jit.script(eager)
        cls.model_path = os.path.join(cls.tmp.name, "neartie.pt")
        cls.scripted.save(cls.model_path)
        x, tags = near_tie_probes(eager)
        cls.x = x
        labels = eager(x).argmax(1)
        cls.probe_path = os.path.join(cls.tmp.name, "probes.pt")
        torch.save({"inputs": x, "labels": labels, "ids": [f"p{i}" for i in range(len(x))], "tags": tags},
                   cls.probe_path)
        # The oracle, in the order ampscope runs its passes: fp32, fp16, bf16, whole set per pass.
        model = torch.jit.load(cls.model_path, map_location=DEVICE).eval()
        cls.eager = eager
        cls.expected = {}
        with torch.no_grad(), torch.jit.optimized_execution(False):
            xd = x.to(DEVICE)
            cls.expected["fp32"] = model(xd).float().cpu().numpy()
            for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                with torch.autocast(DEVICE.split(":")[0], dtype=dt):
                    cls.expected[name] = model(xd).float().cpu().numpy()
        cls.rc, cls.result = run_json("run", "--model", cls.model_path, "--probes", cls.probe_path, "--device", DEVICE,
                                   "--precision", "fp16,bf16", "--batch-size", len(x), "--outputs")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def outputs(self, precision):
        return np.array([[as_float(v) for v in row] for row in pass_of(self.result, precision)["outputs"]],
                        dtype=np.float32)

    def test_outputs_bitwise_equal(self):
        for p in ("fp32", "fp16", "bf16"):
            got, want = self.outputs(p), self.expected[p]
            self.assertEqual(got.shape, want.shape)
            self.assertTrue(np.array_equal(got.view(np.int32), want.view(np.int32)),
                            f"{p}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_unoptimized_script_equals_eager(self):
        if DEVICE != "cpu":
            self.skipTest("eager comparison runs on the CPU")
        with torch.no_grad():
            for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                with torch.autocast("cpu", dtype=dt):
                    eager = self.eager(self.x).float().numpy()
                self.assertTrue(np.array_equal(eager.view(np.int32), self.expected[name].view(np.int32)), name)

    def test_optimizing_executor_is_order_dependent(self):
        """Why ampscope disables executor optimisation for TorchScript models."""
        out = {}
        for order in (("fp16", "bf16"), ("bf16", "fp16")):
            m = torch.jit.load(self.model_path).eval()
            with torch.no_grad():
                m(self.x)
                for name in order:
                    with torch.autocast("cpu", dtype=torch.float16 if name == "fp16" else torch.bfloat16):
                        out[order, name] = m(self.x).float()
        differs = any(not torch.equal(out[("fp16", "bf16"), p], out[("bf16", "fp16"), p]) for p in ("fp16", "bf16"))
        self.assertTrue(differs, "if this fails, the JIT executor no longer caches autocast state: revisit models.cpp")

    def test_decisions_and_flips_match_pytorch(self):
        ref = self.expected["fp32"].argmax(1)
        total_flips = 0
        for p in ("fp16", "bf16"):
            amp = self.expected[p].argmax(1)
            cmp = comparison_of(self.result, p)
            self.assertEqual(cmp["ref_decisions"], ref.tolist())
            self.assertEqual(cmp["amp_decisions"], amp.tolist())
            want_flips = [f"p{i}" for i in np.nonzero(ref != amp)[0]]
            self.assertEqual([f["sample"] for f in cmp["flips"]], want_flips)
            total_flips += len(want_flips)
        self.assertGreater(total_flips, 0, "the near-tie probes should flip at least one decision under AMP")

    @staticmethod
    def reference_decide(scores, tol, rule):
        """The tie rule as the README states it, written independently of ampscope."""
        if not np.all(np.isfinite(scores)):
            return "non-finite"
        best = int(np.argmax(scores))
        tied = [i for i, v in enumerate(scores) if v == scores[best] or float(scores[best]) - float(v) <= tol]
        if len(tied) > 1:
            return -1 if rule == "abstain" else min(tied)
        return best

    def test_tie_rules_with_a_tolerance_match_a_python_reference(self):
        tol = 1e-3
        separated = {"lowest-index": 0, "abstain": 0}
        for rule in ("lowest-index", "abstain"):
            rc, run = run_json("run", "--model", self.model_path, "--probes", self.probe_path, "--device", DEVICE,
                               "--precision", "fp16,bf16", "--batch-size", len(self.x), "--outputs",
                               "--tie-tolerance", tol, "--tie-rule", rule)
            ref = [self.reference_decide(r, tol, rule) for r in self.expected["fp32"]]
            for p in ("fp16", "bf16"):
                amp = [self.reference_decide(r, tol, rule) for r in self.expected[p]]
                cmp = comparison_of(run, p)
                self.assertEqual(cmp["ref_decisions"], ref, f"{rule} {p}")
                self.assertEqual(cmp["amp_decisions"], amp, f"{rule} {p}")
                want_flips = [f"p{i}" for i in range(len(ref)) if ref[i] != amp[i]]
                self.assertEqual([f["sample"] for f in cmp["flips"]], want_flips, f"{rule} {p}")
            argmax = self.expected["fp32"].argmax(1)
            separated[rule] = sum(1 for i, d in enumerate(ref) if d != int(argmax[i]))
        # the data must separate the rules from plain argmax, or this test could not fail
        self.assertGreater(separated["lowest-index"], 0, "no tie whose lowest index differs from argmax")
        self.assertGreater(separated["abstain"], 0, "no abstention")

    def test_verdict_and_exit_status(self):
        self.assertEqual(self.result["verdict"], "rejected")  # flips exceed max_flips 0
        self.assertEqual(self.rc, 1)
        self.assertEqual(self.result["model"]["kind"], "torchscript")
        self.assertEqual(len(self.result["model"]["sha256"]), 64)
        self.assertEqual(self.result["probes"]["count"], len(self.x))
        self.assertEqual(self.result["probes"]["tags"], {"boundary": 12, "ordinary": 20})

    def test_tolerant_criteria_accept(self):
        crit = os.path.join(self.tmp.name, "criteria.json")
        with open(crit, "w") as f:
            f.write('{"atol": 0.1, "rtol": 0.1, "max_flips": 100}')
        rc, run = run_json("run", "--model", self.model_path, "--probes", self.probe_path, "--device", "cpu",
                           "--criteria", crit)
        self.assertEqual(rc, 0)
        self.assertEqual(run["verdict"], "accepted")
        self.assertEqual(run["criteria"]["max_flips"], 100)
        self.assertIn("fixed_at", run["criteria"])


class EveryAmpSampleNonFinite(unittest.TestCase):
    """An FP16 pass whose every score overflows: the headline says there is no finite sample to
    measure |delta| on (it said "max |delta| 0, max rel 0", which reads as a perfect pass), and
    the finite-outputs criterion fails naming all samples."""

    def test_headline_says_no_delta_was_measured(self):
        torch.manual_seed(1)
        net = torch.nn.Linear(8, 3)
        with torch.no_grad():
            net.weight.fill_(1000.0)
        x = torch.full((4, 8), 100.0)  # 8e5 per score: beyond FP16's 65504
        with tempfile.TemporaryDirectory() as d:
            model, probes = os.path.join(d, "m.pt"), os.path.join(d, "p.pt")
            torch.jit.script(net).save(model)
            torch.save({"inputs": x, "labels": torch.zeros(4, dtype=torch.long)}, probes)
            from common import run_cli
            rc, out, err = run_cli("run", "--model", model, "--probes", probes, "--precision", "fp16", "--no-db")
        self.assertEqual(rc, 1, err)
        head = next(line for line in out.splitlines() if line.startswith("fp16 vs fp32"))
        self.assertNotIn("max |delta| 0", head)
        self.assertIn("no finite sample", head)
        self.assertIn("4 of 4 samples have non-finite scores", out)


if __name__ == "__main__":
    unittest.main()
