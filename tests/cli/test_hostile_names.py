# SPDX-License-Identifier: MIT
"""Names that come from the user's files never drive the terminal or break generated code.

PyTorch takes any module name without a dot (add_module("a\\x1b[2J\\x07b", ...)), and a
checkpoint's keys are whatever was saved. advise printed module names raw, replay printed its
warnings (the non-strict key lists), the first non-finite module and the incident raw: an escape
in a name set the terminal's title. advise --python wrote a name holding a newline into a string
literal, so the file it wrote did not compile. Here: every byte of those names reaches the
terminal visible (\\x1b), and the written Python gives back the exact names.
"""
import json
import os
import subprocess
import tempfile
import unittest

import torch
import torch.nn as nn

from common import CLI

EVIL = "a\x1b[2J\x07b"  # no ';' or ',': torch.export.save's nn_module_stack record splits on them
NEWLINE = 'c\n"d\\'
EVIL_KEY = "x\x1b[2Jy"


class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(EVIL, nn.Linear(8, 16))
        self.add_module(NEWLINE, nn.Linear(16, 4))

    def forward(self, x):
        return getattr(self, NEWLINE)(torch.relu(getattr(self, EVIL)(x)))


class HostileNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.d = cls.tmp.name
        torch.manual_seed(0)
        net = Named()
        x = torch.randn(6, 8) * 1e5  # both layers overflow FP16 on their own
        y = torch.tensor([0, 1, 2, 3, 0, 1])
        cls.model = os.path.join(d, "named.pt2")
        torch.export.save(torch.export.export(net.train(), (x,)), cls.model)
        cls.probes = os.path.join(d, "probes.pt")
        torch.save({"inputs": x, "labels": y, "ids": [f"s{i}" for i in range(6)]}, cls.probes)
        cls.batch = os.path.join(d, "batch.pt")
        torch.save({"inputs": x, "labels": y}, cls.batch)
        sd = dict(net.state_dict())
        sd[EVIL_KEY] = torch.zeros(1)
        cls.checkpoint = os.path.join(d, "ckpt.pt")
        torch.save({"model": sd, "optimizer": torch.optim.SGD(net.parameters(), lr=0.1).state_dict()}, cls.checkpoint)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def terminal(self, *args):
        p = subprocess.run([CLI, *args], capture_output=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        for raw in (b"\x1b", b"\x07"):
            self.assertNotIn(raw, p.stdout, f"{args[0]} printed a raw control byte: {p.stdout!r}")
        return p.stdout.decode()

    def test_advise_prints_names_visible_and_writes_python_that_gives_them_back(self):
        script, advice = os.path.join(self.d, "keep.py"), os.path.join(self.d, "advice.json")
        db = os.path.join(self.d, "db.sqlite")
        out = self.terminal("advise", "--model", self.model, "--probes", self.probes, "--precision", "fp16", "--db", db,
                            "--python", script, "--json", advice, "--force")  # timed too: the set matched exactly
        # '[' in a name is a glob character: the search kept "a\x1b[2J\x07b" as a glob that matched
        # nothing, and advised the whole model in FP32
        with open(advice) as f:
            self.assertEqual(json.load(f)["outcome"], "found")
        self.assertIn("a\\x1b[2J\\x07b", out)
        self.assertIn("c\\x0a", out)
        scope = {}
        with open(script) as f:
            exec(compile(f.read(), script, "exec"), scope)  # was a SyntaxError: the newline ended the literal
        self.assertEqual(sorted(scope["KEEP_FP32"]), sorted([EVIL, NEWLINE]))
        net = scope["keep_in_fp32"](Named())  # the names resolve in the user's own module
        self.assertIsNotNone(net)
        # the advice read back as --keep-fp32-file keeps exactly those modules: the run is accepted
        run = os.path.join(self.d, "run.json")
        self.terminal("run", "--model", self.model, "--probes", self.probes, "--precision", "fp16", "--no-db",
                      "--keep-fp32-file", advice, "--json", run, "--force")
        with open(run) as f:
            self.assertEqual(json.load(f)["verdict"], "accepted")
        # bench quotes the nearest recorded run's FP32 regions when it refuses: visible there too
        p = subprocess.run([CLI, "bench", "--model", self.model, "--probes", self.probes, "--precision", "fp16", "--db",
                            db, "--batch-size", "6"], capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 1, p.stderr)
        for raw in (b"\x1b", b"\x07"):
            self.assertNotIn(raw, p.stdout + p.stderr)

    def test_replay_prints_keys_modules_and_warnings_visible(self):
        out = self.terminal("replay", "--model", self.model, "--checkpoint", self.checkpoint, "--batch", self.batch,
                            "--precision", "fp16", "--non-strict", "--no-db")
        self.assertIn("x\\x1b[2Jy", out)  # the key the model does not have, listed in the warning
        self.assertIn("first non-finite", out)
        self.assertIn("a\\x1b[2J\\x07b", out)  # the module where it was born


if __name__ == "__main__":
    unittest.main()
