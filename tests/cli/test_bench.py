# SPDX-License-Identifier: MIT
"""ampscope-cli bench measures gains only after numeric validation: it refuses (exit 1) without
an accepted validation run for the same model, probes, device and precision; --unvalidated
measures anyway and is stored labelled so; results are stored with the validating run."""
import json
import os
import sqlite3
import tempfile
import unittest

from common import run_cli


class Bench(unittest.TestCase):
    def test_gate_then_measure(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "runs.sqlite")
            base = ["bench", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--precision", "bf16",
                    "--repeats", "5", "--warmup", "1", "--db", db]
            rc, out, err = run_cli(*base)
            self.assertEqual(rc, 1)
            self.assertIn("no accepted validation run", err)
            # a rejected run does not validate
            rc, _, _ = run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--precision", "bf16",
                               "--db", db, "-q")
            self.assertEqual(rc, 1)
            self.assertEqual(run_cli(*base)[0], 1)
            rc, _, _ = run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--precision", "bf16",
                               "--atol", "100", "--rtol", "1", "--max-flips", "100", "--db", db, "-q")
            self.assertEqual(rc, 0)
            rc, out, err = run_cli(*base, "--json", "-")
            self.assertEqual(rc, 0, err)
            r = json.loads(out)
            self.assertTrue(r["validated"])
            self.assertEqual([f["precision"] for f in r["figures"]], ["fp32", "bf16"])
            self.assertEqual(r["figures"][0]["speedup"], 1.0)
            for f in r["figures"]:
                self.assertGreater(f["median_ms"], 0)
                self.assertLessEqual(f["p10_ms"], f["median_ms"])
                self.assertLessEqual(f["median_ms"], f["p90_ms"])
                self.assertGreater(f["peak_bytes"], 0)
            rc, out, _ = run_cli("show", r["validation_run"], "--db", db)
            self.assertIn("benchmark", out)
            rc, out, _ = run_cli("bench", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu",
                                 "--repeats", "3", "--warmup", "0", "--db", db, "--unvalidated", "--json", "-")
            self.assertEqual(rc, 0)
            self.assertFalse(json.loads(out)["validated"])
            rc, out, err = run_cli(*base, "--train", "--json", "-")
            self.assertEqual(rc, 0, err)
            t = json.loads(out)
            self.assertEqual(t["what"], "training step")
            self.assertTrue(t["validated"])
            con = sqlite3.connect(db)
            rows = con.execute("SELECT validated, run_id IS NULL FROM benchmarks ORDER BY id").fetchall()
            con.close()
            self.assertEqual(rows, [(1, 0), (0, 1), (1, 0)])


if __name__ == "__main__":
    unittest.main()
