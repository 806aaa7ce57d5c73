# SPDX-License-Identifier: MIT
"""A recorded language-model run is readable (issue 20): its passes hold T x V scores per sample
(6.4 M for GPT-2 at 128 tokens). The store refused passes of more than a million scores per sample,
so a GPT-2-sized run was recorded but `show`, the GUI and `import` then failed on it ("pass
outputs have 10240000 bytes for 1280000 score(s) per sample; expected 10240000").

A small causal LM with a vocabulary of 20000 and 64 positions (1.28 M scores per sample), exported
here by torch.export: recorded, shown, exported and imported into another database; the scores
`show --json --outputs` reads back equal eager PyTorch under torch.autocast, bitwise."""
import json
import os
import tempfile
import unittest

import numpy as np
import torch

from common import as_float, pass_of, run_cli

V, T, N = 20000, 64, 2


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, V)

    def forward(self, input_ids):
        return self.head(self.norm(self.emb(input_ids)))


class RecordedLanguageModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        torch.manual_seed(0)
        cls.model = TinyLM().eval()
        cls.ids = torch.randint(0, V, (N, T))
        cls.pt2, cls.probes = os.path.join(d, "lm.pt2"), os.path.join(d, "tokens.pt")
        torch.export.save(torch.export.export(cls.model, (cls.ids,)), cls.pt2)
        torch.save({"inputs": cls.ids}, cls.probes)
        cls.db = os.path.join(d, "runs.sqlite")
        rc, _, err = run_cli("run", "--model", cls.pt2, "--probes", cls.probes, "--precision", "bf16", "--db", cls.db, "-q")
        assert rc in (0, 1), err
        rc, out, err = run_cli("list", "--db", cls.db, check_rc=0)
        cls.run_id = out.splitlines()[1].split()[0]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def eager(self, dtype):
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            return self.model(self.ids).float().numpy()

    def shown(self, db):
        rc, out, err = run_cli("show", self.run_id, "--db", db, "--json", "--outputs", timeout=600)
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def assert_scores(self, run):
        for precision, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
            rows = pass_of(run, precision)["outputs"]
            got = np.array([[as_float(v) for v in r] for r in rows], dtype=np.float32)
            want = self.eager(dtype).reshape(N, T * V)
            self.assertEqual(got.shape, want.shape)
            self.assertTrue(np.array_equal(got.view(np.int32), want.view(np.int32)), precision)

    def test_show_reads_the_recorded_scores(self):
        run = self.shown(self.db)
        self.assertEqual(pass_of(run, "bf16")["num_outputs"], T * V)
        self.assertIn("tokens", run["comparisons"][0])
        self.assert_scores(run)

    def test_export_and_import_keep_the_run(self):
        bundle = os.path.join(self.tmp.name, "lm.ampscope")
        other = os.path.join(self.tmp.name, "teammate.sqlite")
        run_cli("export", self.run_id, "--db", self.db, "-o", bundle, check_rc=0)
        rc, _, err = run_cli("import", bundle, "--db", other)
        self.assertEqual(rc, 0, err)
        self.assert_scores(self.shown(other))

    def test_a_pass_too_large_for_one_value_is_said_before_the_amp_passes(self):
        # 200 samples x 64 positions x 20000 tokens x 4 bytes = 1.02 GB per pass, above SQLite's
        # 1e9-byte value limit. Was: "bind: string or blob too big" after every pass had run.
        d = self.tmp.name
        program, probes = os.path.join(d, "lm_dyn.pt2"), os.path.join(d, "tokens200.pt")
        torch.export.save(torch.export.export(self.model, (self.ids,), dynamic_shapes=({0: torch.export.Dim("batch")},)), program)
        torch.save({"inputs": torch.randint(0, V, (200, T))}, probes)
        db = os.path.join(d, "large.sqlite")
        rc, out, err = run_cli("run", "--model", program, "--probes", probes, "--precision", "bf16", "--db", db, "-q",
                               "--batch-size", "50")
        self.assertEqual(rc, 2, err)
        for words in ("fp32 pass's scores take 1024 MB", "200 samples x 1280000 scores", "cannot be recorded",
                      "at most 195 samples", "--no-db"):
            self.assertIn(words, err)
        rc, out, _ = run_cli("list", "--db", db, check_rc=0)
        self.assertIn("failed", out.splitlines()[1])  # the run's row says so; the database stays readable


if __name__ == "__main__":
    unittest.main()
