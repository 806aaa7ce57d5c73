# SPDX-License-Identifier: MIT
"""ampscope-cli bench measures gains only after numeric validation of exactly the benchmarked
policy: it refuses (exit 1) unless a completed run accepted the same model file and weights,
probe set, device, precision, FP32 regions and mode, and that run's review is not rejected;
--unvalidated measures anyway and is stored labelled so; the result names the validation run
it relies on (JSON and terminal) and is stored with it."""
import json
import os
import resource
import sqlite3
import tempfile
import unittest

from common import run_cli

LOOSE = ["--atol", "100", "--rtol", "1", "--max-flips", "100"]  # criteria the demo passes


def validate(db, *extra, model="demo:mlp", probes="demo", precision="bf16"):
    """Records a comparison run accepted under LOOSE criteria; returns its id."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run.json")
        run_cli("run", "--model", model, "--probes", probes, "--device", "cpu", "--precision", precision, *LOOSE,
                *extra, "--db", db, "--json", out, "-q", check_rc=0)
        with open(out) as f:
            return json.load(f)["run_id"]


def bench(db, *extra, model="demo:mlp", probes="demo", precision="bf16"):
    return run_cli("bench", "--model", model, "--probes", probes, "--device", "cpu", "--precision", precision,
                   "--repeats", "3", "--warmup", "0", "--db", db, *extra)


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
            run_id = validate(db)
            rc, out, err = run_cli(*base, "--json", "-")
            self.assertEqual(rc, 0, err)
            r = json.loads(out)
            self.assertTrue(r["validated"])
            self.assertEqual(r["validation_run"], run_id)
            self.assertEqual([f["precision"] for f in r["figures"]], ["fp32", "bf16"])
            self.check_figures(r["figures"])
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

    def check_figures(self, figures):
        """Each figure against its definition: speed-up = FP32 median / this median, memory ratio =
        this peak / FP32 peak, percentiles ordered, and a peak that is this process's resident
        set in bytes (at least what LibTorch and the model occupy, at most the largest resident
        set any child of this test ever had: a figure in KiB, or zero, fails)."""
        fp32 = figures[0]
        children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: KiB
        for f in figures:
            self.assertGreater(f["median_ms"], 0)
            self.assertLessEqual(f["p10_ms"], f["median_ms"])
            self.assertLessEqual(f["median_ms"], f["p90_ms"])
            self.assertAlmostEqual(f["speedup"], fp32["median_ms"] / f["median_ms"], delta=1e-9 * f["speedup"])
            self.assertAlmostEqual(f["memory_ratio"], f["peak_bytes"] / fp32["peak_bytes"], delta=1e-9 * f["memory_ratio"])
            self.assertGreater(f["peak_bytes"], 32 << 20, f)
            self.assertLessEqual(f["peak_bytes"], children_peak, f)


class BenchGate(unittest.TestCase):
    """One validation run and the benchmarks it must and must not unlock."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.db = os.path.join(self.dir.name, "runs.sqlite")

    def tearDown(self):
        self.dir.cleanup()

    def assertRefused(self, result, *needles):
        rc, out, err = result
        self.assertEqual(rc, 1, out + err)
        self.assertIn("refusing to measure", err)
        for n in needles:
            self.assertIn(n, err)
        return err

    def test_fp32_regions_must_match(self):
        run_id = validate(self.db, "--keep-fp32", "fc1")
        err = self.assertRefused(bench(self.db), "FP32 regions (validated [fc1], benchmarked none)")
        self.assertIn(f"the nearest, run {run_id}", err)
        self.assertRefused(bench(self.db, "--keep-fp32", "fc2"), "FP32 regions (validated [fc1], benchmarked [fc2])")
        self.assertRefused(bench(self.db, "--keep-fp32", "fc1", "--keep-fp32", "fc2"),
                           "FP32 regions (validated [fc1], benchmarked [fc1, fc2])")
        # and the other way round: a plain-autocast validation does not unlock a benchmark with regions
        validate(self.db)
        self.assertRefused(bench(self.db, "--keep-fp32", "fc2"), "benchmarked [fc2]")

    def test_fp32_regions_matching_are_measured(self):
        run_id = validate(self.db, "--keep-fp32", "fc1")
        rc, out, err = bench(self.db, "--keep-fp32", "fc1", "--json", "-")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual(r["keep_fp32"], ["fc1"])
        self.assertEqual(r["validation_run"], run_id)

    def test_fp32_regions_from_the_advice_file_as_run_takes_them(self):
        """--keep-fp32-file: the advice JSON (or one glob a line) as run reads it, so the policy
        validated with `run --keep-fp32-file` is the one benchmarked; the module paths each match
        that module alone; an unverified advice only with --allow-unverified; a file that is none,
        or names no module, refused by name (exit 2)."""
        advice = os.path.join(self.dir.name, "advice.json")
        with open(advice, "w") as f:
            json.dump({"outcome": "found", "keep_fp32": ["fc1"]}, f)
        run_id = validate(self.db, "--keep-fp32-file", advice)
        rc, out, err = bench(self.db, "--keep-fp32-file", advice, "--json", "-")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual(r["validation_run"], run_id)
        self.assertEqual(r["keep_fp32"], ["fc1"])
        # the flags' globs and the file's together, as run takes them
        self.assertRefused(bench(self.db, "--keep-fp32", "fc2", "--keep-fp32-file", advice),
                           "benchmarked [fc1, fc2]")
        unverified = os.path.join(self.dir.name, "unverified.json")
        with open(unverified, "w") as f:
            json.dump({"outcome": "unverified", "keep_fp32": ["fc1"]}, f)
        rc, out, err = bench(self.db, "--keep-fp32-file", unverified)
        self.assertEqual(rc, 2, out + err)
        self.assertIn(unverified, err)
        self.assertIn("--allow-unverified", err)
        rc, out, err = bench(self.db, "--keep-fp32-file", unverified, "--allow-unverified", "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["validation_run"], run_id)
        nothing = os.path.join(self.dir.name, "nothing.txt")
        with open(nothing, "w") as f:
            f.write("no_such_module\n")
        rc, out, err = bench(self.db, "--keep-fp32-file", nothing, "--unvalidated")
        self.assertEqual(rc, 2, out + err)
        self.assertIn(nothing, err)
        self.assertIn("keep_fp32", err)
        rc, out, err = bench(self.db, "--keep-fp32-file", self.dir.name)
        self.assertEqual(rc, 2, out + err)
        self.assertIn(self.dir.name, err)

    def test_mode_must_match(self):
        run_id = validate(self.db, "--mode", "train")
        self.assertRefused(bench(self.db), "mode (validated train, benchmarked eval)")
        rc, out, err = bench(self.db, "--mode", "train", "--json", "-")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual((r["mode"], r["validation_run"]), ("train", run_id))

    def test_precision_must_match(self):
        validate(self.db, precision="bf16")
        err = self.assertRefused(bench(self.db, precision="fp16"), "fp16: ", "no accepted validation run of fp16")
        err = self.assertRefused(bench(self.db, precision="bf16,fp16"), "fp16: ")
        self.assertNotIn("bf16: ", err)  # bf16 is validated; only fp16 is missing

    def test_probes_must_match(self):
        probes = os.path.join(self.dir.name, "probes.csv")
        with open(probes, "w") as f:
            f.write(",".join([f"x{i}" for i in range(32)] + ["label"]) + "\n")
            for r in range(8):
                f.write(",".join(f"{((r * 7 + i) % 11) / 10 - 0.5:.2f}" for i in range(32)) + f",{r % 2}\n")
        validate(self.db, probes=probes)
        self.assertRefused(bench(self.db), "probe set (validated ")
        self.assertEqual(bench(self.db, probes=probes)[0], 0)

    def test_weights_must_match(self):
        validate(self.db)
        self.assertRefused(bench(self.db, "--seed", "1"), "weights (validated ")

    def test_rejected_review_refuses(self):
        first = validate(self.db)
        run_cli("review", first, "rejected", "--author", "ada", "--db", self.db, check_rc=0)
        self.assertRefused(bench(self.db), f"run {first} validated exactly this policy", "review is rejected (by ada)")
        run_cli("review", first, "open", "--db", self.db, check_rc=0)
        self.assertEqual(bench(self.db)[0], 0)
        # a newer accepted run, rejected by a human: an older accepted run does not stand in for it
        second = validate(self.db)
        run_cli("review", second, "rejected", "--db", self.db, check_rc=0)
        self.assertRefused(bench(self.db), f"run {second} validated exactly this policy")

    def test_the_validation_run_is_named(self):
        other = validate(self.db)
        run_cli("review", other, "accepted", "--author", "bob", "--db", self.db, check_rc=0)
        newer = validate(self.db, "--keep-fp32", "fc2")  # the newest accepted bf16 run, but with FP32 regions
        self.assertRefused(bench(self.db, precision="bf16,fp16"), "fp16: ")
        rc, out, err = bench(self.db, precision="bf16")
        self.assertEqual(rc, 0, err)
        self.assertIn(f"validated bf16 by run {other} (review accepted; accepted under atol 100, rtol 1, max flips 100)", out)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bench.json")
            self.assertEqual(bench(self.db, "--json", path, precision="bf16")[0], 0)
            with open(path) as f:
                r = json.load(f)
        self.assertEqual(r["validation_run"], other)
        v = r["validations"]
        self.assertEqual([(x["precision"], x["run"], x["review"]["status"], x["review"]["by"]) for x in v],
                         [("bf16", other, "accepted", "bob")])
        self.assertEqual((v[0]["criteria"]["atol"], v[0]["criteria"]["max_flips"]), (100, 100))
        con = sqlite3.connect(self.db)
        linked = con.execute("SELECT r.uuid FROM benchmarks b JOIN runs r ON r.id = b.run_id").fetchall()
        con.close()
        self.assertEqual(linked, [(other,), (other,)])
        self.assertNotEqual(newer, other)


if __name__ == "__main__":
    unittest.main()
