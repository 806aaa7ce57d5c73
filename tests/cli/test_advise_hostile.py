# SPDX-License-Identifier: MIT
"""ampscope-cli advise and run --keep-fp32-file against hostile input and misuse: bad input exits 2
with a message naming the file, field or flag and what was expected; nothing crashes (a signal,
exit 3 with a backtrace); the database is never left corrupted or with a half-written run;
Ctrl-C exits 130. The 13 cases this campaign found wrong are marked "Was a bug (fixed)"; each
failed on its assertion before its fix.

The planted model and its helpers are test_advise's (its minimal FP32 set is {blocks.0.up, head})."""
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

import torch
import torch.nn as nn

from common import CLI, run_cli
from test_advise import CRITERIA, PLANTED_SET, Broken, Fragile, Planted, write_planted

DEMO_RUN = ["run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "-q"]
DEMO_MODULES = {"fc1", "act1", "fc2", "act2", "out"}


class Bare(nn.Module):
    """Parameters on the root module only: no submodule to keep in FP32."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.eye(4) * 2.0**12)

    def forward(self, x):
        return (x @ self.w) * 2.0**-12


def db_rows(db):
    """(uuid, status, verdict) of every run, and PRAGMA integrity_check's answer."""
    c = sqlite3.connect(db)
    try:
        has_runs = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
        rows = c.execute("SELECT uuid, status, verdict FROM runs ORDER BY id").fetchall() if has_runs else []
        check = c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()
    return rows, check


class AdviseHostile(unittest.TestCase):
    counter = itertools.count()
    # runs read by more than one test, made by the first that needs them
    _training_refusal = None
    _missing_dir_refusal = None
    _mlp_advice = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.db = cls.path("runs.sqlite")
        write_planted(cls, cls.tmp.name)
        # a recorded, rejected run of the planted model
        rc, run = cls.run_json("run", *cls.planted_spec())
        assert rc == 1 and run["verdict"] == "rejected", run
        cls.rejected = run["run_id"]
        rc, so, se = run_cli("train", "--model", "demo:mlp", "--data", "demo", "--steps", 3, "--device", "cpu",
                             "--db", cls.db, "--json", cls.path("train.json"), "-q")
        assert rc == 0, se
        with open(cls.path("train.json")) as f:
            cls.training = json.load(f)["run_id"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def planted_spec(cls, model=None):
        return ["--model", model or cls.model_path, "--probes", cls.probe_path, "--precision", "fp16,bf16", *CRITERIA,
                "--batch-size", len(cls.x), "--device", "cpu"]

    @classmethod
    def run_json(cls, *args, db=None):
        """ampscope-cli ARGS --db DB --json FILE -q; (rc, JSON or None)."""
        out = cls.path(f"out-{next(cls.counter)}.json")
        rc, so, se = run_cli(*args, "--db", db or cls.db, "--json", out, "-q")
        if not os.path.exists(out):
            return rc, None
        with open(out) as f:
            return rc, json.load(f)

    def advise(self, *args, db=None, out=None):
        """advise ARGS --db DB --json FILE -q; (rc, JSON or None, stderr)."""
        out = out or self.path(f"advise-{next(self.counter)}.json")
        rc, so, se = run_cli("advise", *args, "--db", db or self.db, "--json", out, "-q")
        self.assertNotIn("terminate called", se)
        if not os.path.exists(out):
            return rc, None, se
        with open(out) as f:
            return rc, json.load(f), se

    def bad(self, args, *words, db=None):
        """Exit 2 with every word in stderr, no crash; nothing recorded, the database intact."""
        db = db or self.db
        before = db_rows(db)[0] if os.path.exists(db) else []
        rc, so, se = run_cli(*args, *(["--db", db] if "--no-db" not in args else []))
        self.assertEqual(rc, 2, f"{args}: rc {rc}\nstdout {so}\nstderr {se}")
        for w in words:
            self.assertIn(str(w), se, f"{args}: message lacks {w!r}: {se}")
        self.assertNotIn("terminate called", se)
        if os.path.exists(db):
            rows, check = db_rows(db)
            self.assertEqual(check, "ok")
            self.assertEqual(rows, before, f"{args}: recorded a run")
        return se

    def fresh_db(self, name):
        return self.path(f"{name}-{next(self.counter)}.sqlite")

    # ---- advise RUN ---------------------------------------------------------------------------

    def test_unknown_run(self):
        uuid = "00000000-0000-0000-0000-000000000000"
        self.bad(["advise", uuid, "-q"], self.db, "RUN", uuid, "no run")

    def test_ambiguous_prefix(self):
        db = self.fresh_db("ambiguous")
        firsts = {}
        for _ in range(17):  # 17 runs share a first hex digit for sure
            rc, run = self.run_json(*DEMO_RUN, "--no-inspect", db=db)
            self.assertIsNotNone(run)
            c = run["run_id"][0]
            if c in firsts:
                break
            firsts[c] = run["run_id"]
        self.bad(["advise", c, "-q"], db, "RUN", f"'{c}'", "matches several runs", db=db)

    def training_run_refusal(self):
        """advise TRAINING-RUN, checked by bad(): its stderr. One process for the tests that read it."""
        if AdviseHostile._training_refusal is None:
            AdviseHostile._training_refusal = self.bad(["advise", self.training, "-q"], self.training, "training run")
        return AdviseHostile._training_refusal

    def test_training_run_refused(self):
        self.training_run_refusal()

    # Was a bug (fixed): advise on a training run says "its steps are read with training_steps()" (a C++ API
    # name) instead of what advise expects (a comparison run recorded by `ampscope-cli run`).
    def test_training_run_message_says_what_is_expected(self):
        se = self.training_run_refusal()
        self.assertNotIn("training_steps()", se)
        self.assertIn("comparison", se)

    def test_run_recorded_with_keep_fp32_starts_from_no_regions(self):
        rc, run = self.run_json("run", *self.planted_spec(), "--keep-fp32", "blocks.0.up", "--keep-fp32", "head")
        self.assertEqual((rc, run["verdict"]), (0, "accepted"))
        rc, adv, err = self.advise(run["run_id"], "--no-bench")
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["outcome"], "found", adv["message"])  # not already_accepted: the regions were dropped
        self.assertEqual(set(adv["keep_fp32"]), PLANTED_SET)
        self.assertEqual(adv["advised_from"], run["run_id"])

    def test_invalid_reference_run(self):
        model = Broken().eval()
        x = torch.tensor([[1.0, 2, 3, 0], [0, 1, 1, 1], [3e38, 1, 0, 0], [2, 0, 1, 2]] * 4)
        path, probes = self.path("broken.pt"), self.path("broken-probes.pt")
        torch.jit.script(model).save(path)
        torch.save({"inputs": x}, probes)
        rc, run = self.run_json("run", "--model", path, "--probes", probes, "--device", "cpu")
        self.assertEqual((rc, run["verdict"]), (1, "invalid_reference"))
        before = db_rows(self.db)[0]
        rc, adv, err = self.advise(run["run_id"])
        self.assertEqual(rc, 1, err)
        self.assertEqual(adv["outcome"], "invalid_reference")
        self.assertEqual(adv["keep_fp32"], [])
        self.assertIsNone(adv["verified_run"])
        rows, check = db_rows(self.db)
        self.assertEqual((rows, check), (before, "ok"))

    def test_model_deleted_after_recording(self):
        path = self.path("deleted.pt")
        shutil.copy(self.model_path, path)
        rc, run = self.run_json("run", *self.planted_spec(path))
        self.assertEqual(rc, 1)
        os.remove(path)
        self.bad(["advise", run["run_id"], "-q"], path, "not found")

    # Was a bug (fixed): the model file was replaced after the run was recorded (other weights: the recorded
    # weights_sha256 differs); advise silently advises on the new model, exit 0, and records a
    # verifying run with advised_from naming the old run. Expected: exit 2 naming the file and
    # that it changed since the run was recorded (the run stores sha256 and weights_sha256).
    def test_model_replaced_after_recording(self):
        path = self.path("replaced.pt")
        shutil.copy(self.model_path, path)
        rc, run = self.run_json("run", *self.planted_spec(path))
        self.assertEqual(rc, 1)
        other = Planted().eval()
        with torch.no_grad():
            other.head.weight.fill_(1.0)
        torch.jit.script(other).save(path)
        self.bad(["advise", run["run_id"], "--no-bench", "-q"], path, f"changed since run {run['run_id']}")

    # Was: a model file replaced by something that is no longer a model was refused for what the
    # new file is (not a TorchScript archive), not for having changed since the run was recorded.
    def test_model_replaced_by_another_file_is_said_changed(self):
        path = self.path("overwritten.pt")
        shutil.copy(self.model_path, path)
        rc, run = self.run_json("run", *self.planted_spec(path))
        self.assertEqual(rc, 1)
        with open(path, "wb") as f:
            f.write(b"notes, not a model\n")
        self.bad(["advise", run["run_id"], "--no-bench", "-q"], path, f"the model changed since run {run['run_id']}")

    def test_run_with_no_db(self):
        self.bad(["advise", self.rejected, "--no-db", "-q"], "--no-db")

    def test_run_with_spec_flags(self):
        crit = self.path("crit.json")
        with open(crit, "w") as f:
            f.write('{"atol": 1}')
        for flag, value in (("--model", "demo:mlp"), ("--probes", "demo"), ("--precision", "bf16"), ("--atol", "1"),
                            ("--rtol", "1"), ("--max-flips", "3"), ("--mode", "train"), ("--seed", "1"),
                            ("--batch-size", "2"), ("--criteria", crit), ("--quality-metric", "accuracy")):
            self.bad(["advise", self.rejected, flag, value, "-q"], flag, "give either RUN or")
        for flag, value in (("--keep-fp32", "head"), ("--keep-fp32-file", crit)):  # not advise flags at all
            self.bad(["advise", self.rejected, flag, value, "-q"], flag)

    def test_read_only_database(self):
        ro_dir = self.path(f"ro-{next(self.counter)}")
        os.mkdir(ro_dir)
        os.chmod(self.tmp.name, 0o755)  # nobody (below) must reach it
        db = os.path.join(ro_dir, "runs.sqlite")
        shutil.copy(self.db, db)
        before = db_rows(db)
        prefix = []
        if os.geteuid() == 0:  # root writes anyway: run as nobody
            if not shutil.which("setpriv"):
                self.skipTest("root without setpriv")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        os.chmod(db, 0o444)
        os.chmod(ro_dir, 0o555)
        try:
            p = subprocess.run([*prefix, CLI, "advise", self.rejected, "--db", db, "--no-bench", "-q"],
                               capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        finally:
            os.chmod(ro_dir, 0o755)
            os.chmod(db, 0o644)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(db, p.stderr)
        self.assertIn("readonly", p.stderr.replace("read-only", "readonly"))
        self.assertEqual(db_rows(db), before)

    # Was a bug (fixed): `advise RUN --db MISSING` creates an empty database (and its parent directories) and
    # says "no run 'RUN' in this database"; show and list say "file not found; expected an
    # existing ampscope run database" and create nothing.
    def test_run_in_a_missing_database(self):
        db = self.path("missing/dir/runs.sqlite")
        self.bad(["advise", self.rejected, "-q"], db, "not found", db=db)
        self.assertFalse(os.path.exists(db))

    # Was a bug (fixed): `advise` with neither RUN nor --model silently advises on demo:transformer (RunSpec's
    # default model), exit 0, recording a run: the check "expected a recorded run (ampscope-cli
    # advise RUN) or --model and --probes" in spec_of never fires. Likewise `advise ""`.
    def test_neither_run_nor_model(self):
        db = self.fresh_db("neither")
        self.bad(["advise", "--device", "cpu", "--no-bench", "-q"], "--model", "RUN", db=db)

    # ---- --granularity ------------------------------------------------------------------------

    def test_bad_granularity(self):
        for g in ("", "0", "-1", "leaf ", " leaf", "LEAF", "1e3", "1000", "0x1", "+1"):
            self.bad(["advise", *self.planted_spec(), "--granularity", g, "-q"], "--granularity", f"'{g}'",
                     "expected leaf, block or a depth")

    def test_granularity_deeper_than_the_model(self):
        rc, adv, err = self.advise(*self.planted_spec(), "--granularity", "999", "--no-bench")
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["granularity"], "999")
        self.assertEqual(set(adv["keep_fp32"]), PLANTED_SET)  # every leaf is a candidate, as with leaf

    def test_block_without_numbered_containers(self):
        model = Fragile().eval()
        path, probes = self.path("fragile.pt"), self.path("fragile-probes.pt")
        torch.jit.script(model).save(path)
        torch.save({"inputs": torch.randn(32, 8, generator=torch.Generator().manual_seed(12))}, probes)
        rc, adv, err = self.advise("--model", path, "--probes", probes, "--device", "cpu", "--granularity", "block",
                                   "--no-bench")
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["granularity"], "block")
        self.assertEqual(set(adv["candidates"]), {"fc1", "act", "fragile", "head"})
        self.assertIn("fragile", adv["keep_fp32"])

    def test_model_without_submodules(self):
        path, probes = self.path("bare.pt"), self.path("bare-probes.pt")
        torch.jit.script(Bare().eval()).save(path)
        torch.save({"inputs": self.x}, probes)
        for g in ("leaf", "block", "1"):
            self.bad(["advise", "--model", path, "--probes", probes, "--device", "cpu", "--granularity", g, "-q"],
                     "no submodules", "granularity " + g)

    # ---- --json and --python ------------------------------------------------------------------

    def test_json_to_stdout(self):
        rc, so, se = run_cli("advise", *self.planted_spec(), "--no-bench", "--db", self.db, "--json", "-")
        self.assertEqual(rc, 0, se)
        adv = json.loads(so)  # nothing but the JSON on stdout
        self.assertEqual(adv["outcome"], "found")
        self.assertEqual(set(adv["keep_fp32"]), PLANTED_SET)

    def missing_dir_refusal(self):
        """advise --json into a missing directory, a fresh database: (rc, stderr, json path, database).
        One process for the tests that read it."""
        if AdviseHostile._missing_dir_refusal is None:
            db = self.fresh_db("json-missing")
            out = self.path("no/such/dir/advice.json")
            rc, so, se = run_cli("advise", *self.planted_spec(), "--no-bench", "--db", db, "--json", out, "-q")
            AdviseHostile._missing_dir_refusal = rc, se, out, db
        return AdviseHostile._missing_dir_refusal

    def test_json_into_a_missing_directory(self):
        rc, se, out, db = self.missing_dir_refusal()
        self.assertEqual(rc, 2, se)
        self.assertIn(out, se)
        self.assertIn("--json", se)
        self.assertEqual(db_rows(db), ([], "ok"))  # refused before anything ran or was recorded

    # Was a bug (fixed): --json (and --python) paths are tried only after the whole search, the verifying run
    # (recorded completed/accepted) and the timing: exit 2 then, the advice lost, a run recorded.
    # Expected: the paths checked before the first pass, nothing recorded (`run --json` has the
    # same late check).
    def test_json_path_checked_before_the_search(self):
        rc, se, out, db = self.missing_dir_refusal()
        self.assertEqual(rc, 2, se)
        self.assertEqual(db_rows(db)[0] if os.path.exists(db) else [], [])

    # Was a bug (fixed): an unwritable --python path is reported as "field '--json': cannot write to this path".
    def test_python_unwritable_names_python(self):
        out = self.path("no/such/dir/snippet.py")
        rc, so, se = run_cli("advise", *self.planted_spec(), "--no-bench", "--db", self.fresh_db("python"), "--python",
                             out, "-q")
        self.assertEqual(rc, 2, se)
        self.assertIn(out, se)
        self.assertIn("--python", se)

    # Was a bug (fixed): --json and --python naming the same file: exit 0, the snippet silently overwrites the
    # advice JSON. Expected: exit 2 naming both flags.
    def test_json_and_python_same_file(self):
        same = self.path("same-file")
        rc, so, se = run_cli("advise", *self.planted_spec(), "--no-bench", "--db", self.fresh_db("same"), "--json", same,
                             "--python", same, "-q")
        self.assertEqual(rc, 2, se)
        self.assertIn("--json", se)
        self.assertIn("--python", se)

    # ---- run --keep-fp32-file -----------------------------------------------------------------

    def keep_file(self, name, data):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def demo_run_with(self, path):
        rc, run = self.run_json(*DEMO_RUN, "--keep-fp32-file", path, db=self.fresh_db("keep"))
        self.assertIsNotNone(run, f"{path}: rc {rc}")
        return rc, [set(p["keep_fp32"]) for p in run["passes"] if p["precision"] != "fp32"]

    def test_keep_file_bad_input(self):
        missing = self.path("no-such-keep.txt")
        self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", missing], missing, "--keep-fp32-file", "cannot open")
        for name, text, words in (
                ("empty.txt", "", ["no FP32 region"]),
                ("comments.txt", "# only comments\n   # and this\n\n", ["no FP32 region"]),
                ("no-key.json", '{"outcome": "found"}', ["field 'keep_fp32'", "list of module paths"]),
                ("not-list.json", '{"keep_fp32": "fc1"}', ["field 'keep_fp32'", "list of module paths"]),
                ("numbers.json", '{"keep_fp32": [1, 2]}', ["field 'keep_fp32'", "non-empty module-path strings", "1"]),
                ("empty-str.json", '{"keep_fp32": ["fc1", ""]}', ["field 'keep_fp32'", "non-empty module-path strings"]),
                ("null.json", '{"keep_fp32": [null]}', ["field 'keep_fp32'", "null"]),
                ("truncated.json", '{"keep_fp32": ["fc1", ', ["field 'keep_fp32'", "not valid JSON"]),
                # one reader with the GUI: a glob with a space or comma names its line (was: "matches no module")
                ("spaced.txt", "fc1\nfc1, fc2\n", ["field 'line 2'", "no spaces or commas"]),
                ("latin1.txt", b"fc1\ncaf\xe9\n", ["not UTF-8"])):
            path = self.keep_file(name, text)
            self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", path], path, *words)

    def test_keep_file_glob_matching_no_module(self):
        path = self.keep_file("nomatch.txt", "fc1\nnomatch.*\n")
        self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", path], "'nomatch.*'", "matches no module", "fc1, act1")

    # Was a bug (fixed): a glob from --keep-fp32-file that matches no module was reported against
    # "--keep-fp32" (a flag not given), without the file's name.
    def test_keep_file_glob_matching_no_module_names_the_file(self):
        path = self.keep_file("nomatch2.txt", "nomatch.*\n")
        self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", path], path, "'nomatch.*'")

    def test_keep_file_windows_line_endings(self):
        path = self.keep_file("crlf.txt", "fc1\r\n# comment\r\nfc2  \r\n")
        rc, keep = self.demo_run_with(path)
        self.assertEqual(keep, [{"fc1", "fc2"}] * 2)

    def test_keep_file_empty_json_list_is_no_region(self):
        path = self.keep_file("none.json", '{"outcome": "already_accepted", "keep_fp32": []}')
        rc, keep = self.demo_run_with(path)
        self.assertEqual(keep, [set()] * 2)

    def test_keep_file_from_advise(self):
        out, adv = self.demo_mlp_advice()
        with open(out) as f:
            want = set(json.load(f)["keep_fp32"])
        self.assertTrue(want and want <= DEMO_MODULES)
        rc, keep = self.demo_run_with(out)
        self.assertEqual(rc, 0)
        self.assertEqual(keep, [want] * 2)

    # Was a bug (fixed): a UTF-8 byte-order mark (as Windows editors write) is not skipped: the first glob
    # becomes "\ufefffc1" ("matches no module"), and an advise JSON with a BOM is read as globs.
    def test_keep_file_utf8_bom(self):
        for name, data in (("bom.txt", b"\xef\xbb\xbffc1\nfc2\n"), ("bom.json", b'\xef\xbb\xbf{"keep_fp32": ["fc1", "fc2"]}')):
            rc, keep = self.demo_run_with(self.keep_file(name, data))
            self.assertEqual(keep, [{"fc1", "fc2"}] * 2, name)

    # Was a bug (fixed): a binary file is read as globs: "error: --keep-fp32: '<raw bytes \x7fELF...>" cut at
    # the first NUL, without the file's name or what was expected.
    def test_keep_file_binary(self):
        path = self.keep_file("binary.bin", b"\x7fELF\x02\x01\x01\x03\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00\n\xff\xfe")
        se = self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", path], path, "--keep-fp32-file")
        self.assertNotIn("\x7fELF", se)

    # Was a bug (fixed): a NUL byte in a text file is kept in the glob: "fc1\0" matches fc1 and is recorded as
    # the region "fc1\u0000" (exit 1, not 2).
    def test_keep_file_nul_byte(self):
        path = self.keep_file("nul.txt", b"fc1\x00\n")
        self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", path], path)

    # Was a bug (fixed): a directory as --keep-fp32-file says "no FP32 region in the file" (read as empty);
    # expected: that it is a directory / cannot be read.
    def test_keep_file_directory(self):
        d = self.path(f"dir-{next(self.counter)}")
        os.mkdir(d)
        se = self.bad([*DEMO_RUN, "--no-db", "--keep-fp32-file", d], d)
        self.assertNotIn("no FP32 region", se)

    # ---- Ctrl-C ---------------------------------------------------------------------------------

    def interrupt(self, db, when, extra=()):
        """advise demo:transformer; SIGINT once when(rows) is true (rows: the runs' statuses), or
        after `when` seconds. (rc, seconds from signal to exit, signalled, rows, integrity)."""
        out = self.path(f"sigint-{next(self.counter)}.json")
        p = subprocess.Popen([CLI, "advise", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu",
                              "--db", db, "--json", out, "-q", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
        t0, sent = time.time(), None
        while p.poll() is None and time.time() - t0 < 120:
            if isinstance(when, (int, float)):
                fire = time.time() - t0 >= when
            else:
                try:
                    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05)
                    statuses = [r[0] for r in c.execute("SELECT status FROM runs")]
                    c.close()
                except sqlite3.Error:
                    statuses = []
                fire = when(statuses)
            if fire:
                p.send_signal(signal.SIGINT)
                sent = time.time()
                break
            time.sleep(0.005)
        so, se = p.communicate(timeout=120)
        self.assertNotIn("terminate called", se)
        rows, check = db_rows(db) if os.path.exists(db) else ([], "ok")
        return p.returncode, (time.time() - sent) if sent else None, sent is not None, rows, check, se

    def test_sigint_during_the_search(self):
        for delay in (1.0, 2.0, 4.0, 8.0):  # before the verifying run; later if the signal came before the handler (slow starts: ASan)
            db = self.fresh_db("sigint-search")
            rc, after, sent, rows, check, se = self.interrupt(db, delay, ["--batch-size", "1"])  # slow: ~40 batches a pass
            if rc != -signal.SIGINT and all(r[1] == "cancelled" for r in rows):
                break
        self.assertTrue(sent, "advise ended before the signal")
        self.assertEqual(rc, 130, se)
        self.assertIn("interrupted", se)
        self.assertEqual(check, "ok")
        self.assertEqual([r for r in rows if r[1] != "cancelled"], [], "partial work recorded as a run")

    def test_sigint_during_the_verifying_run(self):
        db = self.fresh_db("sigint-verify")
        rc, after, sent, rows, check, se = self.interrupt(db, lambda s: "running" in s, ["--no-bench", "--batch-size", "1"])
        self.assertTrue(sent, "no verifying run seen")
        self.assertEqual(rc, 130, se)
        self.assertEqual(check, "ok")
        self.assertEqual([(r[1], r[2]) for r in rows], [("cancelled", None)])

    # Was a bug (fixed): SIGINT while advise times the verified set (after the verifying run completed) is
    # ignored: advise goes on timing, writes the JSON and exits 0.
    def test_sigint_during_the_timing(self):
        db = self.fresh_db("sigint-timing")
        rc, after, sent, rows, check, se = self.interrupt(db, lambda s: "completed" in s)
        self.assertTrue(sent, "no completed verifying run seen")
        self.assertEqual(check, "ok")
        self.assertEqual([(r[1], r[2]) for r in rows], [("completed", "accepted")])  # it did complete
        self.assertEqual(rc, 130, se)

    # ---- the demo models ------------------------------------------------------------------------

    def demo_advise(self, model, *extra, out=None):
        db = self.fresh_db("demo")
        rc, adv, err = self.advise("--model", model, "--probes", "demo", "--device", "cpu", *extra, db=db, out=out)
        self.assertEqual(rc, 0, err)
        self.assertIn(adv["outcome"], ("found", "already_accepted"), adv["message"])
        if adv["outcome"] == "found":
            self.assertEqual(adv["verified_verdict"], "accepted")
            rows, check = db_rows(db)
            self.assertEqual(check, "ok")
            self.assertEqual([(r[0], r[1], r[2]) for r in rows], [(adv["verified_run"], "completed", "accepted")])
        return adv

    def demo_mlp_advice(self):
        """advise demo:mlp --no-bench, checked by demo_advise(): (its JSON file, the advice). One
        process for the tests that read it."""
        if AdviseHostile._mlp_advice is None:
            out = self.path("advice-demo-mlp.json")
            AdviseHostile._mlp_advice = out, self.demo_advise("demo:mlp", "--no-bench", out=out)
        return AdviseHostile._mlp_advice

    def test_demo_mlp(self):
        adv = self.demo_advise("demo:mlp")
        self.assertTrue(set(adv["keep_fp32"]) <= DEMO_MODULES)
        self.assertIsNotNone(adv["timing"])

    def test_demo_regressor(self):
        adv = self.demo_advise("demo:regressor", "--no-bench")
        self.assertEqual(adv["model"]["source"], "demo:regressor")

    def test_demo_train_mode(self):  # dropout: every pass has the same seed, so the FP32 check passes
        adv = self.demo_advise("demo:transformer", "--mode", "train", "--no-bench")
        self.assertEqual(adv["outcome"], "found", adv["message"])

    def test_demo_bf16_only(self):
        adv = self.demo_advise("demo:mlp", "--precision", "bf16", "--no-bench")
        for r in adv["reasons"]:
            self.assertTrue(r["detail"].startswith("bf16:"), r)

    def test_demo_batch_size_1(self):
        adv = self.demo_advise("demo:mlp", "--batch-size", "1", "--no-bench")
        _, ref = self.demo_mlp_advice()
        self.assertEqual(adv["keep_fp32"], ref["keep_fp32"])


if __name__ == "__main__":
    unittest.main()
