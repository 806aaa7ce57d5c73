# SPDX-License-Identifier: MIT
"""Out-of-range flag values and criteria files (issue #15): each exits 2 with a message that
names the flag (or the criteria file and key) and the allowed range; nothing wraps silently,
nothing reaches the engine as an exception (exit 3).

Issue 28: no binary binds a std:: call (std::filesystem::remove_all, ...) to the copy that
libtorch.so exports (it crashed on a non-empty folder): checked in the dynamic linker's own
bindings (LD_DEBUG) of every binary built, and on the real call path (export removes its
non-empty build folder)."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from common import CLI, run_cli

RUN = ["run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q", "--no-db"]
TRAIN = ["train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--device", "cpu", "-q", "--no-db"]
BENCH = ["bench", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--unvalidated"]


class HostileCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.db = os.path.join(cls.tmp.name, "runs.sqlite")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def bad(self, args, *words):
        rc, out, err = run_cli(*args)
        self.assertEqual(rc, 2, f"{args}: rc {rc}\nstdout {out}\nstderr {err}")
        for w in words:
            self.assertIn(w, err, f"{args}: message lacks {w!r}: {err}")
        self.assertNotIn("terminate called", err)

    def criteria(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    # ---- 6. criteria files ----
    def test_criteria_values_out_of_range(self):
        cases = [
            ('{"atol": 1e400}', "atol", "out of range"),
            ('{"rtol": -1e400}', "rtol", "out of range"),
            ('{"max_flips": 4294967297}', "max_flips", "from 0 to 2147483647"),
            ('{"max_flips": -1}', "max_flips", "from 0 to 2147483647"),
            ('{"heads": [{"name": "a", "begin": 0, "end": 4294967297}]}', "heads[0].end", "to 2147483647"),
            ('{"heads": [{"begin": -1, "end": 2}]}', "heads[0].begin", "from 0"),
            ('{"heads": [{"begin": 2, "end": 1}]}', "heads[0].end", "end > begin"),
            ('{"atol": -0.001}', "atol", ">= 0"),
            ('{"tie_tolerance": "NaN"}', "tie_tolerance", "finite number"),
            ('{"atol": NaN}', "", "not valid JSON"),
            ('{"rtol": [1]}', "rtol", "finite number"),
            ('{"quality_threshold": "inf"}', "quality_threshold", "finite number"),
            ('{"allow_nonfinite": 1}', "allow_nonfinite", "true or false"),
            ('{"heads": [{"name": 3, "begin": 0, "end": 2}]}', "heads[0].name", "a string"),
        ]
        for i, (text, key, words) in enumerate(cases):
            path = self.criteria(f"c{i}.json", text)
            needles = [path, words] + ([f"field '{key}'"] if key else [])
            self.bad([*RUN, "--criteria", path], *needles)

    def test_criteria_flags_out_of_range(self):
        for flag, value in (("--atol", "-1"), ("--atol", "nan"), ("--atol", "inf"), ("--rtol", "-0.5"),
                            ("--tie-tolerance", "nan"), ("--quality-threshold", "inf"), ("--max-flips", "-1"),
                            ("--max-flips", "4294967297"), ("--max-flips", "1.5")):
            self.bad([*RUN, flag, value], flag, value)

    # ---- 7. values of run, train, bench and list flags ----
    def test_run_values(self):
        for flag, value, words in (("--seed", "-1", "from 0 to 18446744073709551615"),
                                   ("--seed", "18446744073709551616", "from 0"),
                                   ("--batch-size", "0", "from 1"), ("--batch-size", "-4", "from 1"),
                                   ("--device", "cuda:99999999999", "cuda:N"), ("--device", "gpu", "cpu, cuda"),
                                   ("--device", "cpu:0", "cpu, cuda")):
            self.bad([*RUN, flag, value], flag, words)

    def test_train_values(self):
        cases = [("--growth-factor", "-2", "> 1"), ("--growth-factor", "1", "> 1"), ("--growth-factor", "inf", "> 1"),
                 ("--backoff-factor", "2", "< 1"), ("--backoff-factor", "1", "< 1"), ("--backoff-factor", "0", "> 0"),
                 ("--init-scale", "0", "> 0"), ("--init-scale", "-1", "> 0"), ("--init-scale", "inf", "finite"),
                 ("--init-scale", "nan", "finite"), ("--growth-interval", "0", "from 1"),
                 ("--growth-interval", "-5", "from 1"), ("--momentum", "-1", ">= 0"), ("--weight-decay", "nan", "finite"),
                 ("--lr", "inf", "finite"), ("--lr", "-0.1", ">= 0"), ("--steps", "0", "from 1"),
                 ("--steps", "-3", "from 1"), ("--batch-size", "0", "from 1"), ("--accumulate", "0", "from 1"),
                 ("--clip-grad-norm", "-1", ">= 0"), ("--checkpoint-every", "-1", "from 0"), ("--seed", "-1", "from 0"),
                 ("--device", "cuda:99999999999", "cuda:N")]
        for flag, value, words in cases:
            self.bad([*TRAIN, flag, value], flag, words)

    def test_bench_values(self):
        for flag, value in (("--seed", "-1"), ("--batch-size", "0"), ("--repeats", "0"), ("--warmup", "-1"),
                            ("--device", "cuda:99999999999")):
            self.bad([*BENCH, flag, value, "--db", self.db], flag)

    # ---- 8. contradictions (a review of the FP8 flags, issue 30) ----
    def test_contradictory_settings_are_refused(self):
        """Settings that cannot all hold exit 2 naming the flag, instead of being recorded as if they
        applied: an empty precision list for bench; one module in both lists; FP8 settings without
        autocast (the AMP side computes in FP32); a resume to a total the checkpoint already passed."""
        self.bad([*BENCH, "--precision", "", "--db", self.db], "--precision", "no AMP precision")
        self.bad([*BENCH, "--precision", ",", "--db", self.db], "--precision", "no AMP precision")
        self.bad([*RUN, "--precision", ""], "--precision", "fp8-rowwise", "nvfp4", "fp8-delayed")
        for cmd in (RUN, TRAIN):
            self.bad([*cmd, "--precision", "fp8", "--keep-bf16", "fc1", "--keep-fp32", "fc1"], "--keep-bf16",
                     "'fc1' is also kept in FP32")
        for flag in (["--fp8-margin", "1"], ["--fp8-amax-history", "4"], ["--fp8-weight-cache"]):
            self.bad([*TRAIN, "--precision", "fp8-delayed", "--no-autocast", *flag], flag[0], "without autocast"
                     if flag[0] == "--fp8-weight-cache" else "given with --no-autocast")
        self.bad([*TRAIN, "--precision", "mxfp8", "--no-autocast", "--mx-scaling", "floor"], "--mx-scaling",
                 "--no-autocast")
        self.bad([*TRAIN, "--precision", "fp8", "--no-autocast", "--keep-bf16", "fc1"], "--keep-bf16",
                 "without autocast")
        ck = os.path.join(self.tmp.name, "ck")
        os.makedirs(ck, exist_ok=True)
        rc, _, err = run_cli(*TRAIN[:6], "2", *TRAIN[7:], "--checkpoint-every", "2", "--checkpoint-dir", ck)
        self.assertEqual(rc, 0, err)
        [ckpt] = [os.path.join(ck, f) for f in os.listdir(ck)]
        self.bad([*TRAIN[:6], "2", *TRAIN[7:], "--resume", ckpt], "--steps", "is at step 2", "expected more")
        rc, _, err = run_cli(*TRAIN[:6], "3", *TRAIN[7:], "--resume", ckpt)
        self.assertEqual(rc, 0, err)
        # replay reads the user's own job's checkpoints: ampscope's is named, and train --resume offered,
        # also where the pickle follows the tensors (LibTorch writes it last)
        import torch
        batch = os.path.join(self.tmp.name, "batch.pt")
        torch.save({"inputs": torch.randn(4, 16), "labels": torch.randint(0, 4, (4,))}, batch)
        self.bad(["replay", "--model", "demo:mlp", "--checkpoint", ckpt, "--batch", batch, "--no-db", "-q"], ckpt,
                 "an ampscope training checkpoint", "train --resume")
        big = os.path.join(self.tmp.name, "ck-big")
        os.makedirs(big, exist_ok=True)
        rc, _, err = run_cli("train", "--model", "demo:transformer", "--data", "demo", "--steps", "1", "--device", "cpu",
                             "-q", "--no-db", "--optimizer", "adam", "--checkpoint-every", "1", "--checkpoint-dir", big)
        self.assertEqual(rc, 0, err)
        [bigckpt] = [os.path.join(big, f) for f in os.listdir(big)]
        self.assertGreater(os.path.getsize(bigckpt), 1 << 17)  # the pickle well past the first 64 KiB
        self.bad(["replay", "--model", "demo:transformer", "--checkpoint", bigckpt, "--batch", batch, "--no-db", "-q"],
                 bigckpt, "an ampscope training checkpoint")

    def test_vocabulary_values_ignore_case_and_refusals_say_error(self):
        """--precision took FP8 as fp8; the other lists of names now do too (MX block scales, real
        GEMMs, modes, losses, optimizers), recorded in their own spelling; CLI11's own refusals carry
        the CLI's "ampscope-cli: error:" as every other error does."""
        rc, out, err = run_cli(*RUN, "--precision", "MXFP8", "--mx-scaling", "RCEIL", "--mode", "Eval", "--json", "-")
        self.assertIn(rc, (0, 1), err)
        self.assertEqual(json.loads(out)["mx_scaling"], "rceil")
        rc, _, err = run_cli(*TRAIN, "--optimizer", "AdamW", "--loss", "CE", "--lr-schedule", "Cosine")
        self.assertEqual(rc, 0, err)
        self.bad([*RUN, "--precision", "fp8", "--fp8-real-gemm", "maybe"], "ampscope-cli: error: --fp8-real-gemm",
                 "maybe not in {auto,on,off}")
        self.bad([*RUN, "--no-such-flag"], "ampscope-cli: error:")

    def test_list_filters(self):
        run_cli(*RUN[:-1], "--db", self.db)  # one recorded run
        for flag, value, words in (("--since", "yesterday", "ISO-8601"), ("--until", "2025-13-01", "ISO-8601"),
                                   ("--since", "2025-01-01T25:00", "ISO-8601"), ("--verdict", "maybe", "accepted"),
                                   ("--status", "bogus", "completed"), ("--precision", "fp9", "fp8-delayed"),
                                   ("--limit", "-1", "from 0")):
            self.bad(["list", "--db", self.db, flag, value], flag, words)
        rc, out, err = run_cli("list", "--json", "--db", self.db, "--since", "2000-01-01", "--until", "2999-12-31 23:59",
                               "--verdict", json.loads(run_cli("list", "--json", "--db", self.db)[1])[0]["verdict"],
                               check_rc=0)
        self.assertEqual(len(json.loads(out)), 1)
        rc, out, err = run_cli("list", "--json", "--db", self.db, "--since", "2999-01-01T00:00:00Z", check_rc=0)
        self.assertEqual(json.loads(out), [])

    def test_valid_values_still_run(self):
        path = self.criteria("ok.json", '{"atol": 0.5, "rtol": 0.5, "max_flips": 2147483647, '
                                        '"heads": [{"name": "all", "begin": 0, "end": 10}]}')
        rc, out, err = run_cli(*RUN, "--criteria", path, "--seed", "18446744073709551615")
        self.assertIn(rc, (0, 1), err)
        rc, out, err = run_cli(*TRAIN, "--growth-factor", "1.5", "--backoff-factor", "0.25", "--init-scale", "1024",
                               "--growth-interval", "3", "--batch-size", "8")
        self.assertEqual(rc, 0, err)



# A symbol of the C++ standard library (std::..., its type info and vtables), mangled.
STD_SYMBOL = re.compile(r"`_Z(N?K?St|St|T[ISV]N?K?St)")


def std_bindings_into_torch(binary, args, env=None):
    """The std:: symbols that `binary` itself (not its libraries) binds to LibTorch's libraries,
    as the dynamic linker reports them with every symbol bound at start (LD_BIND_NOW)."""
    e = {**os.environ, **(env or {}), "LD_DEBUG": "bindings", "LD_BIND_NOW": "1"}
    try:
        p = subprocess.run([binary, *args], capture_output=True, text=True, errors="replace", timeout=120, env=e,
                           stdin=subprocess.DEVNULL)
        lines = p.stderr.splitlines()
    except subprocess.TimeoutExpired as t:
        lines = (t.stderr or b"").decode(errors="replace").splitlines()
    mine = [l for l in lines if f"binding file {binary} [" in l]
    return mine, [l.strip() for l in mine if STD_SYMBOL.search(l) and re.search(r" to \S*/lib(torch|c10)[^/ ]*\.so", l)]


class NoLibTorchStd(unittest.TestCase):
    def test_no_binary_binds_std_to_libtorch(self):
        # Was: ampscope-cli, engine_tests, ... bound std::filesystem::remove_all (and other std::
        # symbols) to libtorch.so's exported copy, listed before libstdc++ (seen: 60 bindings).
        build = os.path.dirname(os.path.dirname(os.path.abspath(CLI)))
        candidates = [(os.path.abspath(CLI), ["--version"])]
        for rel, args in (("app/ampscope", ["--version"]), ("tests/engine_tests", ["--gtest_list_tests"]),
                          ("tests/gpu_tests", ["--gtest_list_tests"]), ("bench/ampscope_bench", ["--help"]),
                          ("tests/tst_replay", ["-functions"]), ("tests/tst_ui", ["-functions"])):
            if os.access(os.path.join(build, rel), os.X_OK):
                candidates.append((os.path.join(build, rel), args))
        for binary, args in candidates:
            with self.subTest(binary=os.path.basename(binary)):
                mine, wrong = std_bindings_into_torch(binary, args, {"QT_QPA_PLATFORM": "offscreen"})
                self.assertTrue(mine, f"{binary}: no bindings reported (LD_DEBUG unavailable?)")
                self.assertEqual(wrong, [], f"{binary} binds std:: symbols to LibTorch's copies")

    def test_export_removes_its_non_empty_build_folder(self):
        # The real call path: export builds its file in a private folder of $TMPDIR and removes
        # it, non-empty, with std::filesystem::remove_all (LibTorch's copy crashed on it: SIGSEGV).
        with tempfile.TemporaryDirectory() as d:
            db, tmp = os.path.join(d, "runs.sqlite"), os.path.join(d, "tmp")
            os.makedirs(tmp)
            rc, out, err = run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q", "--db", db,
                                   "--json", os.path.join(d, "r.json"))
            self.assertIn(rc, (0, 1), err)
            run_id = json.load(open(os.path.join(d, "r.json")))["run_id"]
            p = subprocess.run([CLI, "export", run_id, "--db", db, "-o", os.path.join(d, "x.ampscope")], capture_output=True,
                               text=True, timeout=120, env={**os.environ, "TMPDIR": tmp})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(os.listdir(tmp), [])  # the build folder and the file in it are gone
            self.assertGreater(os.path.getsize(os.path.join(d, "x.ampscope")), 0)


if __name__ == "__main__":
    unittest.main()
