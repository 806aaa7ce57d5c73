# SPDX-License-Identifier: MIT
"""Language models (issue 20): programs exported here by torch.export from Hugging Face
transformers configurations (GPT-2, LLaMA, BERT; tiny, random weights, built from config objects:
no hub access) and from a small planted model. Probe files hold int64 token ids and attention
masks. The oracles are computed here from Python torch of the same wheel:
- ampscope's FP32/FP16/BF16 outputs equal the eager module under torch.autocast("cpu", dtype), bitwise;
- the per-token figures (KL divergence, same-top, top-5 overlap, RMS dp, flips with positions,
  cross-entropy and perplexity) equal a Python computation of the same definitions;
- the attention mask is honoured (a planted model flips only at masked positions);
- bad inputs exit 2 with a message naming what is wrong."""
import json
import math
import os
import tempfile
import unittest
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, comparison_of, pass_of, run_cli

warnings.filterwarnings("ignore")
try:
    import transformers
    from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                              LlamaForCausalLM)
    transformers.logging.set_verbosity_error()
except ImportError:  # tools/bootstrap.sh installs it into .venv (tests only)
    transformers = None

SEED = 3
V, T, N = 96, 12, 6
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def bits_equal(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def run(*args):
    """ampscope-cli run ... --json; returns (rc, JSON or None, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run.json")
        rc, _, se = run_cli("run", *args, "--json", out, "-q")
        if not os.path.exists(out):
            return rc, None, se
        with open(out) as f:
            return rc, json.load(f), se


def outputs(run_json, precision, shape):
    rows = pass_of(run_json, precision)["outputs"]
    return np.array([[as_float(v) for v in r] for r in rows], dtype=np.float32).reshape(shape)


def token_figures(ref, amp, mask, labels=None):
    """The per-token definitions (llama.cpp perplexity --kl-divergence; Δp of the reference's top token)."""
    ref, amp = torch.from_numpy(ref).double(), torch.from_numpy(amp).double()
    keep = torch.from_numpy(mask).bool()
    lr, la = torch.log_softmax(ref, -1), torch.log_softmax(amp, -1)
    kld = (lr.exp() * (lr - la)).sum(-1)[keep].numpy()
    rd, ad = ref.argmax(-1), amp.argmax(-1)
    dp = la.exp().gather(-1, rd[..., None])[..., 0] - lr.exp().gather(-1, rd[..., None])[..., 0]
    k = min(5, ref.shape[-1])
    # top-k with ties (BF16 logits have many) broken toward the lower token index
    tr = torch.argsort(ref, dim=-1, descending=True, stable=True)[..., :k]
    ta = torch.argsort(amp, dim=-1, descending=True, stable=True)[..., :k]
    overlap = (tr[..., :, None] == ta[..., None, :]).any(-1).sum(-1).double() / k
    flips = [(int(i), int(t), int(rd[i, t]), int(ad[i, t])) for i, t in zip(*np.nonzero((keep & (rd != ad)).numpy()))]
    out = {"positions": int(keep.sum()), "mean_kld": kld.mean(), "p99_kld": np.percentile(kld, 99), "max_kld": kld.max(),
           "same_top": (rd == ad)[keep].double().mean().item(), "top5_overlap": overlap[keep].mean().item(),
           "rms_dp": dp[keep].pow(2).mean().sqrt().item(), "flips": flips}
    if labels is not None:
        lab = torch.from_numpy(labels)[:, 1:]
        use = lab != -100
        for side, lp in (("ref", lr), ("amp", la)):
            nll = -lp[:, :-1].gather(-1, lab.clamp_min(0)[..., None])[..., 0]
            out[side + "_ce"] = nll[use].mean().item()
    return out


class PlantedLM(nn.Module):
    """A one-layer LM whose pad token (id 0) gives two logits 2^-12 apart: BF16 rounds them to a
    tie (lowest index wins), so every pad position flips; every other token has clear margins,
    exactly representable in BF16."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 2)
        self.head = nn.Linear(2, 4, bias=False)
        with torch.no_grad():
            self.emb.weight.zero_()
            self.emb.weight[0, 0] = 1.0
            self.emb.weight[1:, 1] = 1.0
            self.head.weight.copy_(torch.tensor([[1.0, -3.0], [1.0 + 2.0 ** -12, -2.0], [-5.0, 4.0], [-5.0, 1.0]]))

    def forward(self, input_ids, attention_mask):
        logits = self.head(self.emb(input_ids))
        return torch.where(attention_mask.bool().unsqueeze(-1), logits, logits)


class Case:
    """An exported program with its probe file and the eager oracle."""

    def __init__(self, tmp, name, model, ids, mask, labels=None, dynamic=None):
        self.name, self.model, self.ids, self.mask = name, model.eval(), ids, mask
        kw = {"input_ids": ids, "attention_mask": mask}
        ep = torch.export.export(self.model, (), kw, dynamic_shapes=dynamic)
        self.path = os.path.join(tmp, name + ".pt2")
        torch.export.save(ep, self.path)
        self.probes = self.write(tmp, name + "-probes.pt", [ids, mask], labels)

    def write(self, tmp, fname, inputs, labels=None):
        path = os.path.join(tmp, fname)
        data = {"inputs": inputs, "ids": [f"s{i}" for i in range(len(inputs[0]))]}
        if labels is not None:
            data["labels"] = labels
        torch.save(data, path)
        return path

    def eager(self, precision):
        torch.manual_seed(SEED)
        with torch.no_grad():
            if precision == "fp32":
                y = self.model(input_ids=self.ids, attention_mask=self.mask)
            else:
                with torch.autocast("cpu", dtype=DTYPES[precision]):
                    y = self.model(input_ids=self.ids, attention_mask=self.mask)
        y = y.logits if hasattr(y, "logits") else y
        return y.float().numpy()

    def run(self, *extra, probes=None):
        return run("--model", self.path, "--probes", probes or self.probes, "--precision", "fp16,bf16", "--outputs", "--seed", SEED,
                   "--batch-size", len(self.ids), "--device", "cpu", *extra)


def token_batch(g, vocab=V, n=N, t=T):
    ids = torch.randint(1, vocab, (n, t), generator=g)
    mask = torch.ones(n, t, dtype=torch.long)
    mask[0, 8:] = 0  # a padded sample
    mask[3, 10:] = 0
    return ids, mask


@unittest.skipIf(transformers is None, "transformers is not installed (tools/bootstrap.sh installs it)")
class HuggingFacePrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tmp = tempfile.TemporaryDirectory()
        g = torch.Generator().manual_seed(1)
        ids, mask = token_batch(g)
        labels = ids.clone()
        labels[mask == 0] = -100
        gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=32, n_embd=64, n_layer=2, n_head=4, use_cache=False))
        llama = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                             use_cache=False))
        bert = BertForSequenceClassification(BertConfig(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                        intermediate_size=128, max_position_embeddings=32, num_labels=3))
        t = cls.tmp.name
        cls.cases = {"gpt2": Case(t, "gpt2", gpt2, ids, mask, labels), "llama": Case(t, "llama", llama, ids, mask, labels),
                     "bert": Case(t, "bert", bert, ids, mask)}
        cls.labels = labels
        cls.runs = {name: c.run() for name, c in cls.cases.items()}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_outputs_bitwise_equal_to_eager(self):
        for name, case in self.cases.items():
            rc, js, se = self.runs[name]
            self.assertIn(rc, (0, 1), f"{name}: {se}")
            for p in ("fp32", "fp16", "bf16"):
                want = case.eager(p)
                got = outputs(js, p, want.shape)
                self.assertTrue(bits_equal(got, want), f"{name} {p}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_token_inputs_keep_their_dtype(self):
        """int64 ids reach the embedding as int64 (a float cast would refuse or change nothing visible: the
        probe record keeps the shapes, the eager equality above the values)."""
        rc, js, se = self.runs["gpt2"]
        self.assertEqual(js["probes"]["input_shapes"], [[T], [T]])

    def test_every_embedding_the_ids_index_is_checked(self):
        """GPT-2, LLaMA and BERT index their embeddings with the input ids themselves (positions and token
        types come from aranges and buffers): nothing is said unchecked."""
        for name, (rc, js, se) in self.runs.items():
            self.assertEqual([w for w in js["warnings"] if "not checked" in w], [], name)

    def test_per_token_figures_equal_python(self):
        for name in ("gpt2", "llama"):
            case = self.cases[name]
            rc, js, se = self.runs[name]
            ref = case.eager("fp32")
            for p in ("fp16", "bf16"):
                want = token_figures(ref, case.eager(p), case.mask.numpy(), self.labels.numpy())
                tok = comparison_of(js, p)["tokens"]
                self.assertEqual(tok["positions"], want["positions"], f"{name} {p}")
                self.assertEqual(tok["masked"], N * T - want["positions"])
                for key in ("mean_kld", "p99_kld", "max_kld", "same_top", "top5_overlap", "rms_dp"):
                    self.assertAlmostEqual(as_float(tok[key]), float(want[key]), delta=1e-9 + 1e-7 * abs(float(want[key])),
                                           msg=f"{name} {p} {key}")
                lab = tok["labels"]
                self.assertAlmostEqual(lab["ref_cross_entropy"], want["ref_ce"], delta=1e-9)
                self.assertAlmostEqual(lab["amp_cross_entropy"], want["amp_ce"], delta=1e-9)
                self.assertAlmostEqual(lab["ref_perplexity"], np.exp(want["ref_ce"]), delta=1e-7)
                flips = [(int(f["sample"][1:]), f["position"], f["ref"], f["amp"]) for f in comparison_of(js, p)["flips"]]
                self.assertEqual(flips, want["flips"], f"{name} {p}")
                names = [c["name"] for c in comparison_of(js, p)["criteria"]]
                self.assertEqual(names, ["finite_outputs", "score_tolerance", "decision_flips", "mean_kld", "same_top", "quality"])

    def test_the_precisions_differ(self):
        """The oracle separates the policies: the figures above are not trivially zero."""
        case = self.cases["llama"]
        self.assertGreater(token_figures(case.eager("fp32"), case.eager("bf16"), case.mask.numpy())["mean_kld"], 0)

    def test_mask_and_criteria_recorded(self):
        rc, js, se = self.runs["gpt2"]
        c = js["criteria"]
        self.assertEqual(c["mask_input"], "attention_mask")
        self.assertEqual((c["max_flip_rate"], c["max_mean_kld"], c["min_same_top"]), (0.0, 1e-3, 0.99))
        self.assertEqual(c["quality_metric"], "perplexity")

    def test_show_prints_the_token_figures(self):
        rc, js, se = self.runs["gpt2"]
        rc, so, se = run_cli("show", js["run_id"])
        self.assertEqual(rc, 0, se)
        self.assertIn("mean KLD", so)
        self.assertIn("same top-1", so)

    def test_stored_and_read_back(self):
        """The database holds the per-token figures: show --json equals the run's JSON."""
        rc, js, se = self.runs["llama"]
        rc, so, se = run_cli("show", js["run_id"], "--json")
        self.assertEqual(rc, 0, se)
        shown = json.loads(so)
        for p in ("fp16", "bf16"):
            a, b = comparison_of(js, p), comparison_of(shown, p)
            for key in ("positions", "mean_kld", "p99_kld", "same_top", "top5_overlap", "rms_dp", "boundary", "labels"):
                self.assertEqual(a["tokens"][key], b["tokens"][key], f"{p} {key}")
            self.assertEqual(a["flips"], b["flips"])

    def test_classifier_outputs_stay_per_sample(self):
        """BERT sequence classification [N, 3]: one decision per sample, no token figures."""
        rc, js, se = self.runs["bert"]
        self.assertNotIn("tokens", comparison_of(js, "bf16"))

    def test_bad_inputs_exit_2(self):
        case, t = self.cases["gpt2"], self.tmp.name
        ids, mask = case.ids, case.mask
        bad = ids.clone()
        bad[3, 5] = V
        neg = ids.clone()
        neg[1, 2] = -1
        cases = {
            "float-ids": ([ids.float(), mask], None, ["inputs[0] (input_ids)", "is float32 [6, 12]", "int64", "integer"]),
            "out-of-range": ([bad, mask], None, ["sample 's3' position 5", "token id 96", "transformer.wte", "96 rows"]),
            "negative": ([neg, mask], None, ["sample 's1' position 2", "token id -1"]),
            "one-input": ([ids], None, ["gives 1 input tensor(s)"]),
            "float-mask": ([ids, mask.float()], None, ["inputs[1] (attention_mask)", "integer"]),
        }
        for name, (inputs, labels, words) in cases.items():
            path = case.write(t, f"bad-{name}.pt", inputs, labels)
            rc, js, se = case.run(probes=path)
            self.assertEqual(rc, 2, f"{name}: {se}")
            for w in words:
                self.assertIn(w, se, name)
            if name == "out-of-range":
                self.assertIn(path, se)
        bert = self.cases["bert"]
        path = bert.write(t, "bert-token-labels.pt", [ids, mask], self.labels)
        rc, js, se = bert.run(probes=path)
        self.assertEqual(rc, 2, se)
        self.assertIn("token labels [N, 12] need a sequence output", se)


class PlantedMask(unittest.TestCase):
    """Flips only at masked positions: accepted with the mask, rejected without it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        ids = torch.randint(1, 8, (4, 6), generator=torch.Generator().manual_seed(2))
        mask = torch.ones(4, 6, dtype=torch.long)
        ids[1, 3:] = 0  # pad tokens, masked out
        mask[1, 3:] = 0
        ids[2, 5] = 0
        mask[2, 5] = 0
        cls.case = Case(cls.tmp.name, "planted", PlantedLM(), ids, mask)
        cls.unmasked = cls.case.write(cls.tmp.name, "planted-unmasked.pt", [ids, torch.ones_like(mask)])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_flips_exist_only_at_masked_positions(self):
        ref, amp = self.case.eager("fp32"), self.case.eager("bf16")
        flipped = set(zip(*np.nonzero(ref.argmax(-1) != amp.argmax(-1))))
        self.assertEqual(flipped, {(1, 3), (1, 4), (1, 5), (2, 5)})

    def test_mask_honoured(self):
        rc, js, se = self.case.run()
        self.assertEqual(rc, 0, se)
        tok = comparison_of(js, "bf16")["tokens"]
        self.assertEqual((tok["positions"], tok["masked"], tok["same_top"]), (20, 4, 1))
        self.assertEqual(comparison_of(js, "bf16")["flips"], [])

    def test_without_the_mask_the_flips_count(self):
        rc, js, se = self.case.run(probes=self.unmasked)
        self.assertEqual(rc, 1, se)
        flips = [(f["sample"], f["position"], f["ref"], f["amp"]) for f in comparison_of(js, "bf16")["flips"]]
        self.assertEqual(flips, [("s1", 3, 1, 0), ("s1", 4, 1, 0), ("s1", 5, 1, 0), ("s2", 5, 1, 0)])
        crit = {c["name"]: c for c in comparison_of(js, "bf16")["criteria"]}
        self.assertFalse(crit["decision_flips"]["passed"])
        self.assertEqual(crit["decision_flips"]["samples"], ["s1", "s2"])
        self.assertFalse(crit["same_top"]["passed"])  # 20 of 24 positions

    def test_mask_input_flag_names_an_input(self):
        rc, js, se = self.case.run("--mask-input", "nope")
        self.assertEqual(rc, 2, se)
        self.assertIn("no input of that name", se)
        self.assertIn("input_ids, attention_mask", se)

    def test_range_constraints_refuse_a_small_batch(self):
        dyn = {"input_ids": {0: torch.export.Dim("b", min=3)}, "attention_mask": {0: torch.export.Dim("b", min=3)}}
        case = Case(self.tmp.name, "dynamic", PlantedLM(), self.case.ids, self.case.mask, dynamic=dyn)
        small = case.write(self.tmp.name, "two.pt", [self.case.ids[:2], self.case.mask[:2]])
        rc, js, se = run("--model", case.path, "--probes", small, "--precision", "bf16")
        self.assertEqual(rc, 2, se)
        self.assertIn("dimension 0 is 2", se)
        self.assertIn("range_constraints", se)
        rc, js, se = run("--model", case.path, "--probes", self.case.probes, "--precision", "bf16")
        self.assertIn(rc, (0, 1), se)

    def dynamic(self, name, **dim):
        d = torch.export.Dim("b", **dim)
        return Case(self.tmp.name, name, PlantedLM(), self.case.ids[:3], self.case.mask[:3],
                    dynamic={"input_ids": {0: d}, "attention_mask": {0: d}})

    def test_a_last_batch_below_the_range_is_refused_before_any_pass(self):
        """7 samples in batches of 5 leave a last batch of 2 for a program exported for a batch of at
        least 3, which the program's own guards refuse: refused up front (ampscope's interpreter would run
        it), naming the input, the dimension, the batch that would run, the range and the --batch-size
        values that work (4: batches of 4 and 3; 7 or more: one batch)."""
        case = self.dynamic("min3", min=3)
        ids = torch.randint(1, 8, (7, 6), generator=torch.Generator().manual_seed(3))
        seven = case.write(self.tmp.name, "seven.pt", [ids, torch.ones_like(ids)])
        with self.assertRaisesRegex(Exception, ">= 3"):  # what PyTorch says of that last batch
            torch.export.load(case.path).module()(input_ids=ids[5:], attention_mask=torch.ones_like(ids[5:]))
        rc, js, se = run("--model", case.path, "--probes", seven, "--precision", "bf16", "--batch-size", 5)
        self.assertEqual(rc, 2, se)
        for words in ("batch size 5", "7 samples", "a last batch of 2", "'input_ids'", "dimension 0", "[3, inf]",
                      "range_constraints", "batch size 4 or 7"):
            self.assertIn(words, se)
        self.assertIsNone(js)
        self.assertNotIn("pass", se)  # no pass ran
        for ok in (4, 7, 64):
            rc, js, se = run("--model", case.path, "--probes", seven, "--precision", "bf16", "--batch-size", ok)
            self.assertIn(rc, (0, 1), f"--batch-size {ok}: {se}")

    def test_min_2_admits_batches_of_1_as_pytorch_does(self):
        """torch.export lets 0/1 through a minimum of 2 at run time (the 0/1 specialisation; ep.module()
        checks a minimum only above 2): a single sample, or a last batch of 1, runs."""
        case = self.dynamic("min2", min=2)
        one = case.write(self.tmp.name, "one.pt", [self.case.ids[:1], self.case.mask[:1]])
        torch.export.load(case.path).module()(input_ids=self.case.ids[:1], attention_mask=self.case.mask[:1])
        rc, js, se = run("--model", case.path, "--probes", one, "--precision", "bf16")
        self.assertIn(rc, (0, 1), se)
        rc, js, se = run("--model", case.path, "--probes", self.case.probes, "--precision", "bf16", "--batch-size", 3)
        self.assertIn(rc, (0, 1), se)

    def test_the_batch_not_the_probe_count_meets_the_range(self):
        """A program exported for batches of at most 3 runs 4 samples in batches of 2; a batch of 4 is refused."""
        case = self.dynamic("max3", min=2, max=3)
        rc, js, se = run("--model", case.path, "--probes", self.case.probes, "--precision", "bf16", "--batch-size", 2)
        self.assertIn(rc, (0, 1), se)
        rc, js, se = run("--model", case.path, "--probes", self.case.probes, "--precision", "bf16", "--batch-size", 4)
        self.assertEqual(rc, 2, se)
        with self.assertRaisesRegex(Exception, "<= 3"):  # as PyTorch refuses it
            torch.export.load(case.path).module()(input_ids=self.case.ids, attention_mask=self.case.mask)
        for words in ("a batch of 4", "[2, 3]", "use batch size 3\n"):
            self.assertIn(words, se)
        # bench times one batch of min(--batch-size, N): the same range, before anything is timed
        bench = ["bench", "--model", case.path, "--probes", self.case.probes, "--precision", "bf16", "--unvalidated",
                 "--repeats", 3, "--warmup", 0, "--device", "cpu"]
        rc, so, se = run_cli(*bench, "--batch-size", 4)
        self.assertEqual(rc, 2, se)
        self.assertIn("a batch of 4", se)
        rc, so, se = run_cli(*bench, "--batch-size", 3)
        self.assertEqual(rc, 0, se)


class EmbeddingAutocastOff(nn.Module):
    """The embedding inside `with torch.autocast(enabled=False)`: export puts it in a wrap_with_autocast
    subgraph (reshaped there: the ids reach it through a view inside the subgraph)."""

    def __init__(self, vocab=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, 4)
        self.head = nn.Linear(4, 5)

    def forward(self, input_ids):
        with torch.autocast("cpu", enabled=False):
            e = self.emb(input_ids.reshape(-1)).reshape(*input_ids.shape, 4)
        return self.head(e)


class EmbeddingNoGrad(EmbeddingAutocastOff):
    """The embedding inside `with torch.no_grad()`: a wrap_with_set_grad_enabled subgraph."""

    def forward(self, input_ids):
        with torch.no_grad():
            e = self.emb(input_ids)
        return self.head(e)


class EmbeddingOfComputedIds(EmbeddingAutocastOff):
    """Indices computed from the ids (an offset, as RoBERTa's position ids are computed from input_ids):
    no check before the pass can know them, and the run says so."""

    def forward(self, input_ids):
        return self.head(self.emb(input_ids + 1))


class EmbeddingsInSubgraphs(unittest.TestCase):
    """Token ids are checked against embeddings wherever the interpreter runs them (the root graph and the
    wrap_with_autocast / wrap_with_set_grad_enabled subgraphs); where the indices are computed, the run
    says the check did not reach that embedding."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ids = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(6))
        cls.paths = {}
        for m in (EmbeddingAutocastOff, EmbeddingNoGrad, EmbeddingOfComputedIds):
            cls.paths[m.__name__] = os.path.join(cls.tmp.name, m.__name__ + ".pt2")
            torch.export.save(torch.export.export(m().eval(), (cls.ids,)), cls.paths[m.__name__])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def probes(self, name, ids):
        path = os.path.join(self.tmp.name, name + ".pt")
        torch.save({"inputs": ids, "ids": [f"s{i}" for i in range(len(ids))]}, path)
        return path

    def run_on(self, model, ids):
        return run("--model", self.paths[model], "--probes", self.probes(model, ids), "--precision", "bf16", "--device", "cpu")

    def test_the_subgraphs_are_what_the_programs_hold(self):
        targets = {name: {str(n.target) for n in torch.export.load(p).graph.nodes} for name, p in self.paths.items()}
        self.assertIn("wrap_with_autocast", targets["EmbeddingAutocastOff"])
        self.assertIn("wrap_with_set_grad_enabled", targets["EmbeddingNoGrad"])
        self.assertIn("aten.embedding.default", targets["EmbeddingOfComputedIds"])

    def test_ids_out_of_range_in_a_subgraph_exit_2(self):
        for model in ("EmbeddingAutocastOff", "EmbeddingNoGrad"):
            bad = self.ids.clone()
            bad[1, 2] = 8
            rc, js, se = self.run_on(model, bad)
            self.assertEqual(rc, 2, f"{model}: {se}")
            for words in ("sample 's1' position 2", "token id 8", "'emb'", "8 rows", self.probes(model, bad)):
                self.assertIn(words, se, model)
            rc, js, se = self.run_on(model, self.ids)
            self.assertIn(rc, (0, 1), f"{model}: {se}")
            self.assertFalse(any("not checked" in w for w in js["warnings"]), js["warnings"])

    def test_computed_indices_are_said_unchecked(self):
        rc, js, se = self.run_on("EmbeddingOfComputedIds", self.ids)
        self.assertIn(rc, (0, 1), se)
        said = [w for w in js["warnings"] if "not checked" in w]
        self.assertEqual(len(said), 1, js["warnings"])
        for words in ("'emb'", "8 rows", "computed from the input 'input_ids'", "aten.add"):
            self.assertIn(words, said[0])
        bad = self.ids.clone()
        bad[0, 0] = 7  # 7 + 1 is out of range: PyTorch's error inside the pass, and the run says why it was not found before
        rc, js, se = self.run_on("EmbeddingOfComputedIds", bad)
        self.assertEqual(rc, 3, se)
        self.assertIn("index out of range", se)
        self.assertIn("not checked before the pass", se)
        self.assertIn("'emb'", se)


class TinyLM(nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids):
        return self.head(torch.tanh(self.mix(self.emb(input_ids))))


class LossInside(TinyLM):
    """A program that returns its own loss (as Hugging Face models given labels do)."""

    def forward(self, input_ids, labels):
        logits = super().forward(input_ids)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def shifted_ce(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


class TrainLM(unittest.TestCase):
    """train --loss lm (shifted token cross-entropy, -100 ignored) and --loss model, step by step
    against the user's own loop: the same program (torch.export.load(...).module()), SGD,
    torch.autocast + torch.amp.GradScaler."""

    @classmethod
    def setUpClass(cls):
        torch.manual_seed(4)
        cls.tmp = tempfile.TemporaryDirectory()
        g = torch.Generator().manual_seed(5)
        cls.ids = torch.randint(0, 32, (16, 8), generator=g)
        cls.labels = cls.ids.clone()
        cls.labels[::3, 5:] = -100
        cls.lm = os.path.join(cls.tmp.name, "lm.pt2")
        torch.export.save(torch.export.export(TinyLM(), (cls.ids[:4],)), cls.lm)
        cls.inside = os.path.join(cls.tmp.name, "inside.pt2")
        torch.export.save(torch.export.export(LossInside(), (cls.ids[:4], cls.labels[:4])), cls.inside)
        cls.data = os.path.join(cls.tmp.name, "tokens.pt")
        torch.save({"inputs": cls.ids, "labels": cls.labels}, cls.data)
        cls.data_inside = os.path.join(cls.tmp.name, "tokens-inside.pt")
        torch.save({"inputs": [cls.ids, cls.labels]}, cls.data_inside)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def python_run(self, path, steps, inside):
        ref, amp = torch.export.load(path).module(), torch.export.load(path).module()
        opt_r, opt_a = torch.optim.SGD(ref.parameters(), lr=0.5), torch.optim.SGD(amp.parameters(), lr=0.5)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=2)
        loss = (lambda m, x, y: m(x, y)) if inside else (lambda m, x, y: shifted_ce(m(x), y))
        out = []
        for step in range(steps):
            b = (step * 4) % 16
            x, y = self.ids[b:b + 4], self.labels[b:b + 4]
            opt_r.zero_grad()
            opt_a.zero_grad()
            lr_ = loss(ref, x, y)
            lr_.backward()
            opt_r.step()
            scale = scaler.get_scale()
            with torch.autocast("cpu", dtype=torch.float16):
                la = loss(amp, x, y)
            scaler.scale(la).backward()
            scaler.unscale_(opt_a)
            found = sum(v.item() for v in scaler._per_optimizer_states[id(opt_a)]["found_inf_per_device"].values())
            scaler.step(opt_a)
            scaler.update()
            out.append({"loss_ref": lr_.item(), "loss_amp": la.item(), "scale": scale, "skipped": found > 0})
        return out

    def check(self, path, data, loss, inside):
        steps = 10
        want = self.python_run(path, steps, inside)
        rc, so, se = run_cli("train", "--model", path, "--data", data, "--loss", loss, "--steps", steps, "--batch-size", 4,
                             "--lr", 0.5, "--precision", "fp16", "--init-scale", 2.0 ** 24, "--growth-interval", 2, "--device", "cpu",
                             "--json", "-", "-q")
        self.assertIn(rc, (0, 1), se)
        got = json.loads(so)["steps"]
        self.assertEqual(len(got), steps)
        for w, g in zip(want, got):
            self.assertEqual(as_float(g["loss_ref"]), w["loss_ref"], f"{loss} step {g['step']}")
            self.assertEqual(as_float(g["loss_amp"]), w["loss_amp"], f"{loss} step {g['step']}")
            self.assertEqual(as_float(g["scale"]), w["scale"], f"{loss} step {g['step']}")
            self.assertEqual(g["skipped"], w["skipped"], f"{loss} step {g['step']}")
        self.assertTrue(any(w["skipped"] for w in want) and not all(w["skipped"] for w in want))

    def test_loss_lm_matches_a_python_loop(self):
        self.check(self.lm, self.data, "lm", False)

    def test_loss_model_matches_a_python_loop(self):
        self.check(self.inside, self.data_inside, "model", True)

    def test_loss_lm_needs_token_labels(self):
        flat = os.path.join(self.tmp.name, "flat.pt")
        torch.save({"inputs": self.ids, "labels": self.ids[:, 0]}, flat)
        rc, so, se = run_cli("train", "--model", self.lm, "--data", flat, "--loss", "lm", "--steps", 1, "--batch-size", 4)
        self.assertEqual(rc, 2, se)
        self.assertIn("token labels [N, T]", se)

    def test_loss_lm_with_every_label_ignored_is_refused(self):
        """Nothing to train on: PyTorch's mean over no label is NaN, which a step would report as an
        incident. Refused by name before the first step."""
        ignored = torch.full_like(self.labels, -100)
        ignored[:, 0] = 3  # position 0 is never scored
        self.assertTrue(math.isnan(shifted_ce(torch.zeros(2, 8, 32), ignored[:2]).item()))
        path = os.path.join(self.tmp.name, "ignored.pt")
        torch.save({"inputs": self.ids, "labels": ignored}, path)
        rc, so, se = run_cli("train", "--model", self.lm, "--data", path, "--loss", "lm", "--steps", 1, "--batch-size", 4,
                             "--no-db", "--json", "-", "-q")
        self.assertEqual(rc, 2, se)
        for words in (path, "labels", "-100"):
            self.assertIn(words, se)
        self.assertEqual(so, "")

    def test_a_last_batch_below_the_range_is_refused_before_the_first_step(self):
        """train forms batches in file order, the last one short: 7 samples in batches of 5 leave 2 for
        a program exported for at least 3 (PyTorch's own guards refuse it): exit 2 before any step."""
        path = os.path.join(self.tmp.name, "lm-min3.pt2")
        b = torch.export.Dim("b", min=3)
        torch.export.save(torch.export.export(TinyLM(), (self.ids[:4],), dynamic_shapes={"input_ids": {0: b}}), path)
        seven = os.path.join(self.tmp.name, "seven.pt")
        torch.save({"inputs": self.ids[:7], "labels": self.labels[:7]}, seven)
        rc, so, se = run_cli("train", "--model", path, "--data", seven, "--loss", "lm", "--steps", 2, "--batch-size", 5,
                             "--no-db", "--json", "-", "-q")
        self.assertEqual(rc, 2, se)
        for words in ("a last batch of 2", "[3, inf]", "batch size 4 or 7"):
            self.assertIn(words, se)
        self.assertEqual(so, "")  # no step ran
        rc, so, se = run_cli("train", "--model", path, "--data", seven, "--loss", "lm", "--steps", 2, "--batch-size", 4,
                             "--no-db", "-q")
        self.assertIn(rc, (0, 1), se)


class OverflowingLM(nn.Module):
    """Logits of +-1e5: finite in FP32 (the reference's cross-entropy is 2e5, its perplexity
    overflows a double), +-inf in FP16 (the head's weights do not fit: the AMP pass's logits hold
    inf, its log-softmax NaN)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 2)
        self.head = nn.Linear(2, 4, bias=False)
        with torch.no_grad():
            self.emb.weight.zero_()
            self.emb.weight[:, 0] = 1.0
            self.head.weight.copy_(torch.tensor([[1e5, 0.0], [-1e5, 0.0], [0.0, 1.0], [1.0, 0.0]]))

    def forward(self, input_ids):
        return self.head(self.emb(input_ids))


class MaskedVocabLM(PlantedLM):
    """Vocabulary entries 2 and 3 masked to -inf at every position, in every precision."""

    def forward(self, input_ids, attention_mask):
        logits = super().forward(input_ids, attention_mask)
        keep = torch.tensor([True, True, False, False])
        return logits.masked_fill(~keep, float("-inf"))


def program(tmp, name, model, *example):
    path = os.path.join(tmp, name + ".pt2")
    torch.export.save(torch.export.export(model.eval(), example), path)
    return path


def probe_file(tmp, name, inputs, labels=None):
    path = os.path.join(tmp, name + ".pt")
    data = {"inputs": inputs, "ids": [f"s{i}" for i in range(len(inputs[0]))]}
    if labels is not None:
        data["labels"] = labels
    torch.save(data, path)
    return path


class NothingHiddenNothingEmpty(unittest.TestCase):
    """Issue 28's comparison items: non-finite figures stored and shown as such, comparisons with
    nothing compared refused, -inf both passes share not counted, labels that do not fit the metric
    or the output refused, narrow token ids and empty sequences, subnormal flag values."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        cls.ids = torch.randint(1, 8, (4, 6), generator=torch.Generator().manual_seed(7))
        cls.mask = torch.ones(4, 6, dtype=torch.long)
        cls.planted = program(t, "planted", PlantedLM(), cls.ids, cls.mask)
        cls.db = os.path.join(t, "runs.sqlite")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_planted(self, inputs, labels=None, *extra, model=None, name="p"):
        probes = probe_file(self.tmp.name, name, inputs, labels)
        return run("--model", model or self.planted, "--probes", probes, "--precision", "bf16", "--device", "cpu", "--no-db",
                   *extra), probes

    def test_nonfinite_perplexity_is_shown_as_such(self):
        """The incident itself: FP16 logits overflow, the AMP pass's cross-entropy is NaN and the
        reference's perplexity exp(2e5) is inf. show, show --json and an export say so (NULL was read
        back as 0: perplexity 1.0, a perfect score for the incident)."""
        t = self.tmp.name
        ids = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
        labels = torch.tensor([[-100, 1, 1, 1], [-100, 1, 1, 1]])
        model = OverflowingLM().eval()
        path = program(t, "overflow", model, ids)
        probes = probe_file(t, "overflow-probes", [ids], labels)
        with torch.no_grad():
            ref = model(ids)
            with torch.autocast("cpu", dtype=torch.float16):
                amp = model(ids).float()
        ref_ce, amp_ce = shifted_ce(ref, labels).item(), shifted_ce(amp, labels).item()
        self.assertTrue(math.isnan(amp_ce) and math.isfinite(ref_ce) and ref_ce > 710)  # exp(710) > DBL_MAX
        rc, js, se = run("--model", path, "--probes", probes, "--precision", "fp16", "--device", "cpu", "--db", self.db)
        self.assertEqual(rc, 1, se)
        rc, so, se = run_cli("show", js["run_id"], "--db", self.db, "--json")
        self.assertEqual(rc, 0, se)
        bundle = os.path.join(t, "overflow.ampscope")
        run_cli("export", js["run_id"], "--db", self.db, "-o", bundle, check_rc=0)
        rc, exported, se = run_cli("show", js["run_id"], "--db", bundle, "--json")
        self.assertEqual(rc, 0, se)
        imported_db = os.path.join(t, "imported.sqlite")  # the export imports (a 'nan' quality is a valid value)
        run_cli("import", bundle, "--db", imported_db, check_rc=0)
        rc, imported, se = run_cli("show", js["run_id"], "--db", imported_db, "--json")
        self.assertEqual(rc, 0, se)
        for what, shown in (("run", js), ("show", json.loads(so)), ("export", json.loads(exported)), ("import", json.loads(imported))):
            lab = comparison_of(shown, "fp16")["tokens"]["labels"]
            self.assertAlmostEqual(as_float(lab["ref_cross_entropy"]), ref_ce, delta=1e-6 * ref_ce, msg=what)
            self.assertEqual(lab["amp_cross_entropy"], "nan", what)
            self.assertEqual(lab["ref_perplexity"], "inf", what)
            self.assertEqual(lab["amp_perplexity"], "nan", what)
            self.assertEqual(pass_of(shown, "fp16")["quality"], "nan", what)
            self.assertEqual(pass_of(shown, "fp32")["quality"], "inf", what)
        rc, so, se = run_cli("show", js["run_id"], "--db", self.db)
        self.assertIn("perplexity inf -> nan", so)
        rc, so, se = run_cli("run", "--model", path, "--probes", probes, "--precision", "fp16", "--device", "cpu", "--no-db")
        self.assertIn("perplexity inf -> nan", so)  # the run's own summary: the NaN in memory, never "-nan"
        self.assertIn("quality         perplexity nan ", so)
        self.assertNotIn("-nan", so)

    def test_every_position_masked_is_refused(self):
        (rc, js, se), probes = self.run_planted([self.ids, torch.zeros_like(self.mask)], name="allmasked")
        self.assertEqual(rc, 2, se)
        for words in (probes, "attention_mask", "every position", "nothing"):
            self.assertIn(words, se)

    def test_every_label_ignored_is_refused(self):
        labels = torch.full_like(self.ids, -100)
        labels[:, 0] = 1  # position 0 is never scored (logits at t predict the label at t + 1)
        (rc, js, se), probes = self.run_planted([self.ids, self.mask], labels, name="nolabels")
        self.assertEqual(rc, 2, se)
        for words in (probes, "labels", "-100", "nothing"):
            self.assertIn(words, se)

    def test_shared_negative_infinity_is_not_an_incident(self):
        """Masked vocabulary entries: -inf at the same places in both passes. Not a non-finite value
        the AMP pass made: finite_outputs passes and the figures equal Python's over every position."""
        t = self.tmp.name
        model = MaskedVocabLM().eval()
        path = program(t, "maskedvocab", model, self.ids, self.mask)
        (rc, js, se), _ = self.run_planted([self.ids, self.mask], None, "--outputs", model=path, name="mv")
        self.assertEqual(rc, 0, se)
        with torch.no_grad():
            ref = model(self.ids, self.mask)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                amp = model(self.ids, self.mask).float()
        self.assertTrue(torch.equal(torch.isinf(ref), torch.isinf(amp)) and bool(torch.isinf(ref).any()))
        c = comparison_of(js, "bf16")
        crit = {k["name"]: k for k in c["criteria"]}
        self.assertTrue(crit["finite_outputs"]["passed"], crit["finite_outputs"]["detail"])
        lr, la = torch.log_softmax(ref.double(), -1), torch.log_softmax(amp.double(), -1)
        pr = lr.exp()
        kld = torch.where(pr > 0, pr * (lr - la), torch.zeros_like(pr)).sum(-1)
        tok = c["tokens"]
        self.assertEqual(tok["positions"], 24)
        self.assertAlmostEqual(as_float(tok["mean_kld"]), kld.mean().item(), delta=1e-12)
        self.assertEqual(as_float(tok["same_top"]), (ref.argmax(-1) == amp.argmax(-1)).double().mean().item())

    def test_accuracy_with_token_labels_is_refused(self):
        labels = self.ids % 4
        (rc, js, se), probes = self.run_planted([self.ids, self.mask], labels, "--quality-metric", "accuracy",
                                                "--quality-threshold", "0.9", name="acc")
        self.assertEqual(rc, 2, se)
        for words in ("accuracy", "token labels", "token_accuracy"):
            self.assertIn(words, se)

    def test_class_labels_on_a_sequence_output_are_refused(self):
        (rc, js, se), probes = self.run_planted([self.ids, self.mask], torch.zeros(4, dtype=torch.long), name="cls")
        self.assertEqual(rc, 2, se)
        for words in (probes, "labels", "[N]", "[N, T]"):
            self.assertIn(words, se)

    def test_narrow_token_ids_run_as_int64(self):
        """int8, uint8 and int16 ids: PyTorch's embedding takes only int64 and int32 indices, so they
        are widened to int64 when read; the outputs equal the eager module on the int64 ids, bitwise."""
        with self.assertRaisesRegex(RuntimeError, "Long, Int"):
            PlantedLM()(self.ids.to(torch.int8), self.mask)
        model = PlantedLM().eval()
        with torch.no_grad():
            want = {p: (model(self.ids, self.mask) if p == "fp32" else self.autocast(model, p)).float().numpy()
                    for p in ("fp32", "bf16")}
        for dtype in (torch.int8, torch.uint8, torch.int16):
            (rc, js, se), _ = self.run_planted([self.ids.to(dtype), self.mask.to(dtype)], None, "--outputs", name=str(dtype))
            self.assertIn(rc, (0, 1), f"{dtype}: {se}")
            for p in ("fp32", "bf16"):
                self.assertTrue(bits_equal(outputs(js, p, want[p].shape), want[p]), f"{dtype} {p}")

    def autocast(self, model, p):
        with torch.autocast("cpu", dtype=DTYPES[p]):
            return model(self.ids, self.mask)

    def test_empty_sequences_are_refused_by_name(self):
        """A program exported for any sequence length, given T = 0: the probe file is at fault, not the model."""
        t = torch.export.Dim("t", min=1)
        path = os.path.join(self.tmp.name, "anylength.pt2")
        torch.export.save(torch.export.export(PlantedLM().eval(), (self.ids, self.mask), dynamic_shapes=({1: t}, {1: t})), path)
        ids = torch.zeros(4, 0, dtype=torch.long)
        (rc, js, se), probes = self.run_planted([ids, ids.clone()], model=path, name="empty")
        self.assertEqual(rc, 2, se)
        for words in (probes, "inputs[0]", "[4, 0]"):
            self.assertIn(words, se)

    def test_subnormal_flip_rate_accepted(self):
        (rc, js, se), _ = self.run_planted([self.ids, self.mask], None, "--max-flip-rate", "1e-320", name="sub")
        self.assertIn(rc, (0, 1), se)
        self.assertEqual(js["criteria"]["max_flip_rate"], 1e-320)
        rc, so, se = run_cli("run", "--max-flip-rate", "1e400", "--model", self.planted, "--probes", "x.pt")
        self.assertEqual(rc, 2, se)
        self.assertIn("--max-flip-rate", se)


if __name__ == "__main__":
    unittest.main()
