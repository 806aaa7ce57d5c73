# SPDX-License-Identifier: MIT
"""The documented story of demo:transformer through the CLI: edge samples overflow in FP16
inside 'embed' and stay finite in BF16 and FP32; some boundary samples flip; the CLI exits 1
for it and 0 for criteria that accept; keeping 'embed' in FP32 removes the non-finite values."""
import unittest

from common import comparison_of, pass_of, run_cli, run_json


class DemoStory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rc, cls.result = run_json("run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu")

    def edge_ids(self):
        return [d["sample"] for d in comparison_of(self.result, "fp16")["deltas"] if d["tag"] == "edge"]

    def test_exit_status_and_verdict(self):
        self.assertEqual(self.rc, 1)
        self.assertEqual(self.result["verdict"], "rejected")

    def test_fp16_overflows_in_embed_for_exactly_the_edge_samples(self):
        edge = self.edge_ids()
        self.assertEqual(len(edge), 8)
        fp16 = pass_of(self.result, "fp16")
        self.assertEqual(fp16["nonfinite_samples"], edge)
        self.assertEqual(fp16["origin"]["stage"], "forward")
        self.assertEqual(fp16["origin"]["module"], "embed")
        self.assertEqual(fp16["origin"]["op"], "aten::matmul")
        self.assertEqual(fp16["origin"]["samples"], edge)
        origin_layer = fp16["layers"][fp16["origin"]["index"]]
        self.assertTrue(origin_layer["origin"])
        self.assertEqual(origin_layer["dtype"], "Half")
        self.assertTrue(origin_layer["inputs_finite"])
        self.assertEqual(pass_of(self.result, "bf16")["nonfinite_samples"], [])
        self.assertEqual(pass_of(self.result, "fp32")["nonfinite_samples"], [])
        self.assertIsNone(pass_of(self.result, "bf16")["origin"])

    def test_boundary_samples_flip(self):
        for p in ("fp16", "bf16"):
            flips = comparison_of(self.result, p)["flips"]
            boundary = [f for f in flips if f["tag"] == "boundary"]
            self.assertTrue(boundary, p)
            for f in boundary:
                self.assertLess(f["ref_margin"], 1e-3)

    def test_nonfinite_samples_are_counted_once_and_shown_as_such(self):
        edge = set(self.edge_ids())
        cmp = comparison_of(self.result, "fp16")
        crit = {c["name"]: c for c in cmp["criteria"]}
        self.assertEqual(set(crit["finite_outputs"]["samples"]), edge)
        self.assertFalse(crit["finite_outputs"]["passed"])
        # excluded from the tolerance and flip checks, listed as non-finite (never as a class or abstain)
        self.assertFalse(edge & set(crit["score_tolerance"]["samples"]))
        self.assertFalse(edge & set(crit["decision_flips"]["samples"]))
        listed = {f["sample"]: f for f in cmp["flips"] if f["sample"] in edge}
        self.assertEqual(set(listed), edge)
        self.assertTrue(all(f["amp"] == "non-finite" for f in listed.values()), listed)
        self.assertIn("8 non-finite samples not counted", crit["decision_flips"]["detail"])

    def test_allow_nonfinite_changes_the_verdict(self):
        base = ["run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu", "--precision", "fp16",
                "--atol", "10", "--rtol", "10", "--max-flips", "100"]
        rc, strict = run_json(*base)
        self.assertEqual((rc, strict["verdict"]), (1, "rejected"))
        rc, allowed = run_json(*base, "--allow-nonfinite")
        crit = {c["name"]: c for c in comparison_of(allowed, "fp16")["criteria"]}
        self.assertTrue(crit["finite_outputs"]["passed"])
        self.assertEqual(len(crit["finite_outputs"]["samples"]), 8)  # still reported
        self.assertEqual((rc, allowed["verdict"]), (0, "accepted"))

    def test_default_criteria(self):
        # (that criteria are stored before the first pass: test_hostile_inputs, a run cancelled inside it)
        c = self.result["criteria"]
        self.assertEqual((c["max_flips"], c["atol"], c["rtol"], c["tie_rule"]), (0, 1e-3, 1e-2, "lowest-index"))

    def test_keep_fp32_on_origin_module(self):
        rc, r = run_json("run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu",
                         "--precision", "fp16", "--keep-fp32", "embed")
        fp16 = pass_of(r, "fp16")
        self.assertEqual(fp16["keep_fp32"], ["embed"])
        self.assertEqual(fp16["nonfinite_samples"], [])
        self.assertIsNone(fp16["origin"])

    def test_accepting_criteria_exit_0(self):
        rc, r = run_json("run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu",
                         "--precision", "bf16", "--atol", "0.1", "--max-flips", "40")
        self.assertEqual(rc, 0)
        self.assertEqual(r["verdict"], "accepted")

    def test_terminal_summary_and_layers(self):
        rc, out, _ = run_cli("run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu",
                             "--precision", "fp16", "--layers")
        self.assertEqual(rc, 1)
        self.assertIn("non-finite values born at forward", out)
        self.assertIn("<- origin", out)
        self.assertIn("(propagated)", out)
        self.assertIn("verdict: rejected", out)


if __name__ == "__main__":
    unittest.main()
