# SPDX-License-Identifier: MIT
"""The unscale decision as a stage of its own (issue 21). A GradScaler state whose scale is so
small (1e-39, a float32 subnormal) that 1/scale overflows to inf: the scaled gradients are
finite (zero: they underflow), unscaling turns them into NaN, and GradScaler, which checks the
gradients *before* multiplying them by 1/scale, finds nothing and does not skip: Adam applies
NaN. Python's torch.amp.GradScaler loaded with the same state is the oracle for found_inf, the
skip decision, the scale after update() and the (NaN) parameters; `ampscope-cli replay` must
name the stage `unscale` (not backward) and say in its JSON and terminal summary that
GradScaler does not skip the step."""
import os
import unittest

import torch

from common import as_float, run_cli
from test_replay import Incident, Net, replay

TINY = 1e-39


class UnscaleStage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = Incident(Net, 7, lambda x, y: (x, y), {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})
        cls.tiny = os.path.join(cls.inc.tmp.name, "tiny-scaler.pt")
        torch.save(dict(cls.inc.state[2], scale=TINY), cls.tiny)

    @classmethod
    def tearDownClass(cls):
        cls.inc.tmp.cleanup()

    def test_inverse_scale_overflow_is_the_unscale_stage(self):
        inc = self.inc
        want = inc.python_step({"scale": TINY})
        self.assertFalse(want["amp"]["skipped"], "GradScaler checks the scaled gradients: it does not skip")
        self.assertFalse(any(want["amp"]["finite"].values()), "Adam applied the NaN gradients in Python")
        self.assertTrue(all(want["ref"]["finite"].values()))
        rc, got = replay(inc.model, [os.path.join(inc.tmp.name, "dict.pt"), "--scaler-state", self.tiny], inc.batch)
        self.assertEqual(rc, 1, got)
        f = got["first_nonfinite"]
        self.assertEqual((f["stage"], f["side"], f["step"]), ("unscale", "amp", 0), f)
        self.assertIn("1/scale", f["op"])
        step = got["steps"][0]
        # GradScaler keeps its scale as a float32 tensor (get_scale() before the first step returns
        # the Python number it was given): the scale the loss was multiplied by
        self.assertEqual(as_float(step["scale"]), torch.tensor(want["amp"]["scale"], dtype=torch.float32).item())
        self.assertFalse(step["found_inf"])
        self.assertEqual(step["skipped"], want["amp"]["skipped"])
        self.assertEqual(as_float(step["scale_after"]), want["amp"]["scale_after"])
        self.assertEqual(as_float(step["loss_amp"]), want["amp"]["loss"])
        for p in step["params"]:
            self.assertEqual((p["sha256_ref"], p["sha256_amp"]), (want["ref"]["sha"][p["name"]], want["amp"]["sha"][p["name"]]))
            self.assertFalse(p["weights_finite"])

    def test_terminal_summary_says_whether_gradscaler_skips(self):
        inc = self.inc
        rc, out, err = run_cli("replay", "--model", inc.model, "--checkpoint", os.path.join(inc.tmp.name, "dict.pt"), "--scaler-state",
                               self.tiny, "--batch", inc.batch, "--no-db")
        self.assertEqual(rc, 1, err)
        self.assertIn("first non-finite: unscale", out)
        self.assertIn("GradScaler does not skip the step", out)
        # the backward incident of test_replay: GradScaler skips
        planted = Incident(Net, 7, lambda x, y: (x * 400.0, y), {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})
        try:
            rc, out, err = run_cli("replay", "--model", planted.model, "--checkpoint", *planted.formats["dict"], "--batch",
                                   planted.batch, "--no-db")
            self.assertEqual(rc, 1, err)
            self.assertIn("first non-finite: backward", out)
            self.assertIn("GradScaler skips the step", out.split("first non-finite:")[1])
        finally:
            planted.tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
