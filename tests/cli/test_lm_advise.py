# SPDX-License-Identifier: MIT
"""advise on a language-model program (issue 20: "advise works unchanged on language-model
programs, judged by the per-token criteria"). A tiny causal LM whose block `coarse` adds and
removes 2048: in FP16 (autocast) the hidden state is rounded to steps of 2 there, so the logits
change and top-1 tokens flip at many positions, with no non-finite value and every score within
a loose element tolerance. Only the per-position criteria (flip rate, mean KLD, same top-1) can
reject the pass, so advise must find `coarse.lin` (the leaf whose output is rounded) by them; with those criteria loosened the same
program is already accepted. The oracle is eager PyTorch: torch.autocast, and the advised set
kept in FP32 as the advisor's snippet does (autocast disabled inside, inputs cast to float)."""
import json
import os
import tempfile
import unittest

import torch
import torch.nn as nn

from common import run_cli

V, W, N, T = 32, 16, 4, 12


class Coarse(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(W, W)

    def forward(self, h):
        return (self.lin(h) + 2048.0) - 2048.0


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(V, W)
        self.coarse = Coarse()
        self.head = nn.Linear(W, V)
        with torch.no_grad():
            self.head.weight.mul_(4.0)  # clear margins between logits, so FP16 rounding elsewhere flips nothing

    def forward(self, input_ids):
        return self.head(torch.tanh(self.coarse(self.emb(input_ids))))


def eager(model, ids, keep=()):
    handles = []
    for name in keep:
        mod = model.get_submodule(name)
        handles.append(mod.register_forward_pre_hook(lambda m, a: tuple(x.float() for x in a)))
        orig = mod.forward

        def fp32(*a, _orig=orig):
            with torch.autocast("cpu", enabled=False):
                return _orig(*a)

        mod.forward = fp32
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            return model(ids).float()
    finally:
        for h in handles:
            h.remove()
        for name in keep:
            del model.get_submodule(name).forward


def flip_rate(ref, amp):
    return (ref.argmax(-1) != amp.argmax(-1)).double().mean().item()


class AdviseLM(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = TinyLM().eval()
        cls.ids = torch.randint(0, V, (N, T), generator=torch.Generator().manual_seed(1))
        cls.pt2 = os.path.join(cls.tmp.name, "lm.pt2")
        torch.export.save(torch.export.export(cls.model, (cls.ids,)), cls.pt2)
        cls.probes = os.path.join(cls.tmp.name, "tokens.pt")
        torch.save({"inputs": cls.ids}, cls.probes)
        with torch.no_grad():
            cls.ref = cls.model(cls.ids)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def advise(self, *criteria):
        rc, so, se = run_cli("advise", "--model", self.pt2, "--probes", self.probes, "--precision", "fp16", "--no-db",
                             "--no-bench", "-q", "--json", "-", "--atol", "1e9", "--max-flips", "1000000", *criteria)
        self.assertIn(rc, (0, 1), se)
        return json.loads(so)

    def test_the_planted_case_separates(self):
        # Python: plain FP16 flips many positions; with the leaf `coarse.lin` in FP32 (its output,
        # and so the +/- 2048 after it, stays float32) none flips.
        self.assertGreater(flip_rate(self.ref, eager(self.model, self.ids)), 0.2)
        self.assertEqual(flip_rate(self.ref, eager(self.model, self.ids, ["coarse.lin"])), 0.0)

    def test_advise_finds_the_module_by_the_per_token_criteria(self):
        adv = self.advise("--max-flip-rate", "0", "--max-mean-kld", "1e-3", "--min-same-top", "0.99")
        self.assertEqual(adv["outcome"], "found", adv.get("message"))
        self.assertEqual(adv["keep_fp32"], ["coarse.lin"])  # the leaf (default granularity)

    def test_loose_per_token_criteria_accept_it_as_it_is(self):
        adv = self.advise("--max-flip-rate", "1", "--max-mean-kld", "1e9", "--min-same-top", "0")
        self.assertEqual(adv["outcome"], "already_accepted", adv.get("message"))
        self.assertEqual(adv["keep_fp32"], [])


if __name__ == "__main__":
    unittest.main()
