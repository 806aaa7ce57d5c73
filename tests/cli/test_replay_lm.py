# SPDX-License-Identifier: MIT
"""Incident replay of a language model (`replay --loss lm|model`, issue 21): a Python training
loop (torch.autocast FP16, torch.amp.GradScaler, Adam; Hugging Face's causal-LM convention:
logits at t against the token at t + 1, labels -100 ignored) on a tiny causal LM exported with
torch.export. A rare token whose embedding is large (60000, representable in FP16) appears
only in the batch of step K: the mix layer's FP16 output overflows there. The state of step
K-1 and that batch are saved; `ampscope-cli replay` on the .pt2 program must give Python's
losses, scale, skip decision and updated parameters bitwise, and name the module and op
Python's forward hooks name. Bad input (--loss lm on a classifier, token labels that do not fit
the logits, --loss model on a program that returns logits) exits 2, named. A tiny Hugging Face
LLaMA (transformers config, random weights) replays a step bitwise with both losses."""
import copy
import hashlib
import math
import os
import tempfile
import unittest

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, run_cli
from test_replay import FirstNonFiniteFunction, replay

warnings.filterwarnings("ignore")
try:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    transformers.logging.set_verbosity_error()
except ImportError:  # tools/bootstrap.sh installs it into .venv (tests only)
    transformers = None

K = 3  # the incident's step
V, W, N, T = 32, 16, 8, 10
RARE = V - 1  # only the batch of step K holds it


class CausalLM(nn.Module):
    """input_ids [N, T], attention_mask [N, T] -> logits [N, T, V]."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, W)
        self.mix = nn.Linear(W, W)
        self.head = nn.Linear(W, V)
        with torch.no_grad():  # mix's first output overflows FP16 on the rare token
            self.emb.weight[RARE] = 60000.0 * torch.sign(self.mix.weight[0])

    def logits(self, input_ids, attention_mask):
        h = torch.relu(self.mix(self.emb(input_ids)))
        return self.head(h * attention_mask.unsqueeze(-1))  # int mask: h keeps its dtype

    def forward(self, input_ids, attention_mask):
        return self.logits(input_ids, attention_mask)


class CausalLMWithLoss(CausalLM):
    """Returns its own loss given labels, as Hugging Face models do (--loss model)."""

    def forward(self, input_ids, attention_mask, labels):
        return shifted_ce(self.logits(input_ids, attention_mask), labels)


def shifted_ce(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def token_batches(seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for step in range(K + 1):
        ids = torch.randint(0, RARE, (N, T), generator=g)
        mask = torch.ones(N, T, dtype=torch.long)
        mask[1, 7:] = 0  # a padded sample
        if step == K:
            ids[2, 4] = RARE
        labels = ids.masked_fill(mask == 0, -100)
        out.append((ids, mask, labels))
    return out


class LMIncident:
    """The user's job in Python up to step K-1; the state saved as a dict checkpoint."""

    def __init__(self, cls, inside, seed=5, opt_kwargs=None, scaler_kwargs=None):
        torch.manual_seed(seed)
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.net, self.inside = cls(), inside
        self.opt_kwargs = opt_kwargs or {"lr": 1e-3}
        data = token_batches(seed)
        self.ids, self.mask, self.labels = data[K]
        args = (self.ids, self.mask, self.labels) if inside else (self.ids, self.mask)
        self.model = os.path.join(d, "lm.pt2")
        torch.export.save(torch.export.export(self.net, args), self.model)
        opt = torch.optim.Adam(self.net.parameters(), **self.opt_kwargs)
        scaler = torch.amp.GradScaler("cpu", **(scaler_kwargs or {"init_scale": 2.0 ** 10}))
        for ids, mask, labels in data[:K]:
            loss, _, skipped = self.amp_step(self.net, opt, scaler, ids, mask, labels, torch.float16)
            assert not skipped and math.isfinite(loss), "the ordinary steps train"
        self.state = (copy.deepcopy(self.net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())
        self.ckpt = os.path.join(d, "ckpt.pt")
        torch.save({"model": self.state[0], "optimizer": self.state[1], "scaler": self.state[2]}, self.ckpt)
        self.batch = os.path.join(d, "batch.pt")
        if inside:
            torch.save({"inputs": [self.ids, self.mask, self.labels]}, self.batch)
        else:
            torch.save({"inputs": [self.ids, self.mask], "labels": self.labels}, self.batch)

    def loss(self, net, ids, mask, labels):
        return net(ids, mask, labels) if self.inside else shifted_ce(net(ids, mask), labels)

    def amp_step(self, net, opt, scaler, ids, mask, labels, dtype):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = self.loss(net, ids, mask, labels)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()) > 0
        scaler.step(opt)
        scaler.update()
        return loss.item(), scale, found

    def python_step(self, dtype=torch.float16):
        """Step K from the saved state: the AMP job's and the FP32 reference's figures."""
        sd, osd, ssd = self.state
        out = {}
        for side in ("amp", "ref"):
            net = copy.deepcopy(self.net)
            net.load_state_dict(sd)
            opt = torch.optim.Adam(net.parameters(), **self.opt_kwargs)
            opt.load_state_dict(copy.deepcopy(osd))
            if side == "amp":
                scaler = torch.amp.GradScaler("cpu")
                scaler.load_state_dict(ssd)
                loss, scale, skipped = self.amp_step(net, opt, scaler, self.ids, self.mask, self.labels, dtype)
                out[side] = {"loss": loss, "scale": scale, "skipped": skipped, "scale_after": scaler.get_scale()}
            else:
                opt.zero_grad()
                loss = self.loss(net, self.ids, self.mask, self.labels)
                loss.backward()
                opt.step()
                out[side] = {"loss": loss.item()}
            out[side]["sha"] = {n: sha(p) for n, p in net.named_parameters()}
        return out

    def python_forward_origin(self):
        net, bad = copy.deepcopy(self.net), []
        for n, m in net.named_modules():
            if n:
                m.register_forward_hook(lambda m, i, o, n=n: bad.append(n) if not bool(torch.isfinite(o).all()) else None)
        mode = FirstNonFiniteFunction()
        args = (self.ids, self.mask, self.labels) if self.inside else (self.ids, self.mask)
        with torch.autocast("cpu", dtype=torch.float16), torch.no_grad(), mode:
            net(*args)
        return bad[0], "aten::" + mode.first


class ReplayLM(unittest.TestCase):
    def check_same_as_python(self, got, want):
        step = got["steps"][-1]
        self.assertTrue(same(as_float(step["loss_amp"]), want["amp"]["loss"]), (step["loss_amp"], want["amp"]["loss"]))
        self.assertEqual(as_float(step["loss_ref"]), want["ref"]["loss"])
        self.assertEqual(as_float(step["scale"]), want["amp"]["scale"])
        self.assertEqual(step["skipped"], want["amp"]["skipped"])
        self.assertEqual(as_float(step["scale_after"]), want["amp"]["scale_after"])
        self.assertEqual(sorted(p["name"] for p in step["params"]), sorted(want["ref"]["sha"]))
        for p in step["params"]:
            self.assertEqual(p["sha256_ref"], want["ref"]["sha"][p["name"]], f"FP32 reference {p['name']}")
            self.assertEqual(p["sha256_amp"], want["amp"]["sha"][p["name"]], f"AMP {p['name']}")

    def check_incident(self, cls, inside, loss):
        inc = LMIncident(cls, inside)
        try:
            module, op = inc.python_forward_origin()
            self.assertEqual(module, "mix", "the overflow is where the test planted it")
            want = inc.python_step()
            self.assertTrue(want["amp"]["skipped"], "GradScaler skips the planted step in Python")
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", loss, "--device", "cpu")
            self.assertEqual(rc, 1, got)
            f = got["first_nonfinite"]
            self.assertEqual((f["stage"], f["module"], f["op"], f["side"], f["step"]), ("forward", module, op, "amp", 0))
            self.check_same_as_python(got, want)
            # the remedy BF16: no overflow, the AMP update applied, bitwise Python's
            want = inc.python_step(torch.bfloat16)
            self.assertFalse(want["amp"]["skipped"])
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", loss, "--precision", "bf16", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertIsNone(got["first_nonfinite"])
            self.check_same_as_python(got, want)
        finally:
            inc.tmp.cleanup()

    def test_loss_lm_replays_pythons_step(self):
        self.check_incident(CausalLM, False, "lm")

    def test_loss_model_replays_pythons_step(self):
        self.check_incident(CausalLMWithLoss, True, "model")

    def test_default_loss_of_token_labels_is_lm(self):
        inc = LMIncident(CausalLM, False)
        try:
            want = inc.python_step(torch.bfloat16)
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--precision", "bf16", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.check_same_as_python(got, want)
        finally:
            inc.tmp.cleanup()


class Logits(nn.Module):
    """A Hugging Face causal LM as the job calls it: logits of (input_ids, attention_mask)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits


class OwnLoss(Logits):
    """... or with labels, its own loss (Hugging Face's shifted cross-entropy)."""

    def forward(self, input_ids, attention_mask, labels):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


@unittest.skipIf(transformers is None, "transformers is not installed (tools/bootstrap.sh installs it)")
class HuggingFaceLM(unittest.TestCase):
    """A tiny LLaMA (random weights, from a config: no hub) trained two AMP steps in Python;
    the third step replayed from its dict checkpoint equals Python's bitwise, with the loss
    computed by replay (lm) and by the model itself (model)."""

    def check(self, cls, loss):
        torch.manual_seed(2)
        lm = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                          num_key_value_heads=1, max_position_embeddings=16, use_cache=False))
        inc = LMIncident.__new__(LMIncident)
        inc.tmp, inc.inside, inc.net, inc.opt_kwargs = tempfile.TemporaryDirectory(), loss == "model", cls(lm), {"lr": 1e-3}
        try:
            d = inc.tmp.name
            data = token_batches(9)
            inc.ids, inc.mask, inc.labels = data[K]
            args = (inc.ids, inc.mask, inc.labels) if inc.inside else (inc.ids, inc.mask)
            inc.model = os.path.join(d, "llama.pt2")
            torch.export.save(torch.export.export(inc.net.train(), args), inc.model)
            opt = torch.optim.Adam(inc.net.parameters(), **inc.opt_kwargs)
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
            for ids, mask, labels in data[:2]:
                inc.amp_step(inc.net, opt, scaler, ids, mask, labels, torch.float16)
            inc.state = (copy.deepcopy(inc.net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())
            ckpt, batch = os.path.join(d, "ckpt.pt"), os.path.join(d, "batch.pt")
            torch.save({"model": inc.state[0], "optimizer": inc.state[1], "scaler": inc.state[2]}, ckpt)
            torch.save({"inputs": list(args)} if inc.inside else {"inputs": list(args), "labels": inc.labels}, batch)
            want = inc.python_step()
            # rotary_emb.inv_freq is a non-persistent buffer: in the program, not in a state_dict
            non_persistent = {n for n, _ in inc.net.named_buffers()} - set(inc.state[0])
            rc, got = replay(inc.model, [ckpt, "--non-strict"], batch, "--loss", loss, "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertLessEqual(set(got["keys"]["missing"]), non_persistent)
            self.assertEqual((got["keys"]["unexpected"], got["keys"]["mismatched"]), ([], []))
            self.assertIsNone(got["first_nonfinite"])
            ReplayLM.check_same_as_python(self, got, want)
        finally:
            inc.tmp.cleanup()

    def test_llama_loss_lm(self):
        self.check(Logits, "lm")

    def test_llama_loss_model(self):
        self.check(OwnLoss, "model")

    def test_tied_weights_are_named(self):
        """GPT-2's lm_head.weight is transformer.wte.weight: one parameter in the job's optimizer,
        two in the exported program. Not replayed yet: exit 2 naming both."""
        torch.manual_seed(2)
        net = Logits(GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=16, n_embd=32, n_layer=1, n_head=2, use_cache=False,
                                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)))
        with tempfile.TemporaryDirectory() as d:
            ids, mask, labels = token_batches(9)[0]
            model, ckpt, batch = (os.path.join(d, n) for n in ("gpt2.pt2", "ckpt.pt", "batch.pt"))
            torch.export.save(torch.export.export(net.train(), (ids, mask)), model)
            opt = torch.optim.Adam(net.parameters())
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "scaler": {}}, ckpt)
            torch.save({"inputs": [ids, mask], "labels": labels}, batch)
            rc, err = replay(model, [ckpt], batch, "--loss", "lm", "--device", "cpu")
            self.assertEqual(rc, 2, err)
            for n in ("ckpt.pt", "lm.lm_head.weight", "lm.transformer.wte.weight", "tied"):
                self.assertIn(n, err)


class BadLMInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = LMIncident(CausalLM, False)
        d = cls.d = cls.inc.tmp.name
        ids, mask, labels = cls.inc.ids, cls.inc.mask, cls.inc.labels
        p = lambda n: os.path.join(d, n)
        torch.save({"inputs": [ids, mask], "labels": labels[:, 0]}, p("flat.pt"))
        torch.save({"inputs": [ids, mask], "labels": torch.cat([labels, labels[:, :1]], 1)}, p("long.pt"))
        # a classifier (TorchScript) with its own checkpoint, given token labels
        clf = nn.Sequential(nn.Linear(4, 3))
        torch.jit.script(clf).save(p("clf.pt"))
        opt = torch.optim.Adam(clf.parameters())
        torch.save({"model": clf.state_dict(), "optimizer": opt.state_dict(), "scaler": torch.amp.GradScaler("cpu").state_dict()},
                   p("clf-ckpt.pt"))
        torch.save({"inputs": torch.randn(N, 4), "labels": torch.randint(0, 3, (N, T))}, p("clf-tokens.pt"))

    @classmethod
    def tearDownClass(cls):
        cls.inc.tmp.cleanup()

    def bad(self, model, ckpt, batch, loss, *named):
        rc, err = replay(model, [ckpt], batch, "--loss", loss, "--device", "cpu")
        self.assertEqual(rc, 2, err)
        for n in named:
            self.assertIn(n, err)
        self.assertNotIn("terminate called", err)

    def test_lm_needs_token_labels(self):
        self.bad(self.inc.model, self.inc.ckpt, os.path.join(self.d, "flat.pt"), "lm", "flat.pt", "labels", "token labels [N, T]")

    def test_lm_labels_that_do_not_fit_the_logits(self):
        self.bad(self.inc.model, self.inc.ckpt, os.path.join(self.d, "long.pt"), "lm", "long.pt", "labels", f"[N, {T + 1}]")

    def test_lm_on_a_classifier(self):
        p = lambda n: os.path.join(self.d, n)
        self.bad(p("clf.pt"), p("clf-ckpt.pt"), p("clf-tokens.pt"), "lm", "clf-tokens.pt", "labels", "logits")

    def test_ce_with_token_labels(self):
        self.bad(self.inc.model, self.inc.ckpt, self.inc.batch, "ce", "batch.pt", "--loss lm")

    def test_model_loss_on_a_program_returning_logits(self):
        self.bad(self.inc.model, self.inc.ckpt, self.inc.batch, "model", "lm.pt2", "--loss model", "expected the loss")


if __name__ == "__main__":
    unittest.main()
