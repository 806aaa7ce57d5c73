# SPDX-License-Identifier: MIT
"""`ampscope-cli run` under torchrun (issue 31): ranks run contiguous shards of whole batches,
rank 0 records one run. The oracle is the same spec run by one process: every per-sample figure,
decision, flip, origin and count is equal; per-op mean and RMS (merged from the ranks' partial
sums) agree to rounding. Faults: a rank that fails to load, loads another model, is killed or
hangs stops every rank with a message naming it, and no run is recorded. Ranks are launched by
torchrun itself (python -m torch.distributed.run) and, for the faults, by hand with torchrun's
variables (rank 0 then hosts the store), or into a store this test hosts as torchrun's agent does."""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

import torch

from common import CLI, run_cli

warnings.filterwarnings("ignore")
TIMING = {"run_id", "started_at", "finished_at", "fixed_at", "seconds", "num_threads", "ranks"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_process(*args):
    """The single-process oracle with one thread per process, as torchrun gives each rank (the
    statistics kernel splits a tensor between threads: its partial sums follow the thread count)."""
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return p.returncode, p.stdout, p.stderr


def torchrun(nproc, *args, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "--no-python", CLI, *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def launch(per_rank_args, extra_env=None, port=None):
    """Ranks started by hand with torchrun's variables; returns the processes."""
    port = port or free_port()
    procs = []
    for rank, args in enumerate(per_rank_args):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(len(per_rank_args)),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1", **(extra_env or {}))
        procs.append(subprocess.Popen([CLI, *map(str, args)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
    return procs


def finish(procs, timeout=300):
    out = []
    for p in procs:
        so, se = p.communicate(timeout=timeout)
        out.append((p.returncode, so, se))
    return out


def close(a, b, path=""):
    """Equal JSON values, except timing fields; floats named mean/rms to 1e-12 relative."""
    if isinstance(a, dict):
        assert set(a) - TIMING == set(b) - TIMING, f"{path}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            if k not in TIMING:
                close(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float) and path.rsplit("/", 1)[-1] in ("mean", "rms"):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def count_runs(db):
    if not os.path.exists(db):
        return 0
    rc, so, se = run_cli("list", "--db", db, "--json", check_rc=0)
    return len(json.loads(so))


class Planted(torch.nn.Module):
    """A classifier whose FP16 pass overflows for large inputs (an origin at fc1's matmul)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x * 300.0)))


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask):
        h = torch.tanh(self.proj(self.emb(input_ids))) * attention_mask.unsqueeze(-1).to(torch.float32)
        return self.head(h)


class Looping(torch.nn.Module):
    """Never returns for a batch holding the value 777 (a hang inside one batch)."""

    def forward(self, x):
        y = x
        while bool((y == 777.0).any()):
            y = y + 0.0
        return y[:, :4]


class Files:
    """Programs and probe files written once for the whole test."""

    @classmethod
    def make(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        g = torch.Generator().manual_seed(3)
        torch.manual_seed(3)
        b = torch.export.Dim("b", min=2)
        x = torch.randn(37, 12, generator=g)
        x[5] *= 1000  # FP16 overflow in fc1 for a few samples, on the second rank's shard too
        x[30] *= 1000
        cls.pt2 = os.path.join(d, "planted.pt2")
        torch.export.save(torch.export.export(Planted().eval(), (x[:4],), dynamic_shapes=({0: b},)), cls.pt2)
        cls.other = os.path.join(d, "other.pt2")  # same graph, other weights
        torch.export.save(torch.export.export(Planted().eval(), (x[:4],), dynamic_shapes=({0: b},)), cls.other)
        cls.probes = os.path.join(d, "probes.pt")
        torch.save({"inputs": x, "labels": torch.randint(0, 4, (37,), generator=g)}, cls.probes)
        ids = torch.randint(0, 50, (23, 9), generator=g)
        mask = torch.ones(23, 9, dtype=torch.int64)
        mask[::3, 6:] = 0
        cls.lm = os.path.join(d, "lm.pt2")
        torch.export.save(torch.export.export(TinyLM().eval(), (ids[:4], mask[:4]),
                                              dynamic_shapes=({0: b}, {0: b})), cls.lm)
        cls.lm_probes = os.path.join(d, "lm_probes.pt")
        torch.save({"inputs": [ids, mask], "labels": ids}, cls.lm_probes)
        cls.looping = os.path.join(d, "looping.pt")
        torch.jit.script(Looping()).save(cls.looping)
        x = torch.randn(16, 12, generator=g)
        x[13, 0] = 777.0  # rank 1's shard (batches of 4: samples 8-15)
        cls.looping_probes = os.path.join(d, "looping_probes.pt")
        torch.save({"inputs": x}, cls.looping_probes)
        big = torch.randn(2000000, 12, generator=g)
        cls.big_probes = os.path.join(d, "big.pt")
        torch.save({"inputs": big}, cls.big_probes)


def setUpModule():
    Files.make()


def tearDownModule():
    Files.dir.cleanup()


class SameRunAsOneProcess(unittest.TestCase):
    """2 ranks under torchrun against 1 process: the recorded runs are equal (batches that do not
    divide evenly between the ranks: 40 samples in batches of 16 are 16 + 24; 37 in 8 are 16 + 21)."""

    def compare(self, *args):
        with tempfile.TemporaryDirectory() as d:
            one, two = os.path.join(d, "one.json"), os.path.join(d, "two.json")
            db1, db2 = os.path.join(d, "one.db"), os.path.join(d, "two.db")
            rc1, _, se1 = one_process("run", *args, "--db", db1, "--json", one, "--outputs", "-q")
            p = torchrun(2, "run", *args, "--db", db2, "--json", two, "--outputs", "-q")
            self.assertIn(rc1, (0, 1), se1)
            # torchrun passes on a failing rank's code: a rejected verdict is 1 there too
            self.assertEqual(p.returncode, rc1, p.stderr[-3000:])
            a, b = json.load(open(one)), json.load(open(two))
            close(a, b)
            self.assertEqual(count_runs(db2), 1)  # recorded once, by rank 0
            shown = [json.loads(run_cli("show", r["run_id"], "--db", db, "--json", "--outputs", check_rc=0)[1])
                     for r, db in ((a, db1), (b, db2))]
            close(*shown)  # the recorded run is the single-process run
            self.assertNotIn("ranks", a)
            ranks = b["ranks"]  # which rank ran which samples, on which host and device
            self.assertEqual(ranks, shown[1]["ranks"])
            self.assertEqual([r["rank"] for r in ranks], [0, 1])
            self.assertEqual([r["host"] for r in ranks], [socket.gethostname()] * 2)
            self.assertEqual([r["device"] for r in ranks], ["cpu", "cpu"])
            self.assertEqual(ranks[0]["first_sample"], 0)
            self.assertEqual(ranks[1]["first_sample"], ranks[0]["samples"])
            self.assertEqual(sum(r["samples"] for r in ranks), a["probes"]["count"])
            self.assertTrue(all(r["samples"] > 0 for r in ranks), ranks)
            self.assertTrue(all(r["seconds"] > 0 for r in ranks), ranks)
            self.assertEqual(ranks[0]["bytes"], 0)
            self.assertGreater(ranks[1]["bytes"], 4 * ranks[1]["samples"] * len(a["passes"]))  # at least the scores
            text = run_cli("show", b["run_id"], "--db", db2, check_rc=0)[1]
            self.assertIn("ranks", text)
            return a, b

    def test_demo_transformer(self):
        a, _ = self.compare("--model", "demo:transformer", "--probes", "demo", "--precision", "fp16,bf16",
                            "--batch-size", "16")
        self.assertTrue(any(p.get("origin") for p in a["passes"]), "the oracle should hold an FP16 origin")

    def test_demo_mlp_and_regressor(self):
        self.compare("--model", "demo:mlp", "--probes", "demo", "--batch-size", "7")
        self.compare("--model", "demo:regressor", "--probes", "demo", "--batch-size", "16", "--precision", "bf16")

    def test_program_with_origins_on_both_ranks(self):
        a, _ = self.compare("--model", Files.pt2, "--probes", Files.probes, "--batch-size", "8", "--precision",
                            "fp16")
        origin = next(p["origin"] for p in a["passes"] if p["precision"] == "fp16")
        self.assertEqual(len(origin["samples"]), 2)  # one on each rank's shard

    def test_language_model(self):
        a, _ = self.compare("--model", Files.lm, "--probes", Files.lm_probes, "--batch-size", "5", "--precision",
                            "bf16")
        self.assertIn("tokens", json.dumps(a["comparisons"]))


class Faults(unittest.TestCase):
    def test_other_model_on_one_rank_is_refused_before_any_pass(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "r.db")
            common = ["--probes", Files.probes, "--db", db, "-q"]
            res = finish(launch([["run", "--model", Files.pt2, *common], ["run", "--model", Files.other, *common]]))
            for rc, so, se in res:
                self.assertEqual(rc, 2, se)
                self.assertIn("rank 1 on", se)
                self.assertIn("field 'model'", se)
            self.assertEqual(count_runs(db), 0)

    def test_missing_probe_file_on_one_rank_names_it(self):
        with tempfile.TemporaryDirectory() as d:
            db, missing = os.path.join(d, "r.db"), os.path.join(d, "nowhere.pt")
            res = finish(launch([["run", "--model", Files.pt2, "--probes", Files.probes, "--db", db, "-q"],
                                 ["run", "--model", Files.pt2, "--probes", missing, "--db", db, "-q"]]))
            self.assertEqual([r[0] for r in res], [2, 2], res)
            self.assertIn("rank 1 on", res[0][2])
            self.assertIn("nowhere.pt", res[0][2])
            self.assertEqual(count_runs(db), 0)

    def test_only_rank_zero_touches_the_database(self):
        with tempfile.TemporaryDirectory() as d:
            db0, db1 = os.path.join(d, "zero.db"), os.path.join(d, "one.db")
            res = finish(launch([["run", "--model", "demo:mlp", "--probes", "demo", "--db", db0, "-q"],
                                 ["run", "--model", "demo:mlp", "--probes", "demo", "--db", db1, "-q"]]))
            self.assertEqual(res[1][0], 0, res)  # the verdict is rank 0's to give
            self.assertEqual(count_runs(db0), 1)
            self.assertFalse(os.path.exists(db1))

    def test_other_commands_refuse_torchrun(self):
        """train, advise, bench and replay are one process each: every rank would record the same work."""
        for cmd in (["train", "--model", "demo:mlp", "--data", "demo", "--steps", "2", "--no-db"],
                    ["bench", "--model", "demo:mlp", "--probes", "demo"],
                    ["advise", "--model", "demo:mlp", "--probes", "demo", "--no-db"],
                    ["replay", tempfile.gettempdir()]):
            res = finish(launch([cmd, cmd]))
            for rc, so, se in res:
                self.assertEqual(rc, 2, (cmd, se))
                self.assertIn(f"ampscope-cli {cmd[0]} runs in one process", se)
                self.assertIn("WORLD_SIZE", se)

    def killed(self, procs, victim, db, limit):
        time.sleep(8)  # both ranks are inside the passes, under ASan too (2,000,000 samples at batch 1: minutes of passes, so rank 0 must
        # notice the loss while it is still inside its own shard)
        self.assertIsNone(procs[0].poll(), "the run ended before the kill")
        victim.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        res = finish(procs, timeout=120)
        self.assertLess(time.monotonic() - t0, limit)
        self.assertNotEqual(res[0][0], 0)
        self.assertIn("rank 1", res[0][2], f"rc {res[0][0]}")
        self.assertEqual(count_runs(db), 0)  # nothing partial is recorded
        return res

    def test_killed_rank_stops_the_others_by_heartbeat(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "r.db")
            args = ["run", "--model", Files.pt2, "--probes", Files.big_probes, "--batch-size", "1", "--db", db,
                    "--lost-after", "3", "-q"]
            procs = launch([args, args])
            res = self.killed(procs, procs[1], db, limit=20)
            self.assertIn("stopped responding", res[0][2])

    def test_killed_rank_under_torchrun(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "r.db")
            # --monitor-interval 2: torchrun's agent polls its workers every 0.1 s by default and then
            # SIGTERMs the others; on a loaded machine (an ASan build beside it) that can come before
            # rank 0 has read the closed connection and said so. Two seconds leave it the time.
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                   "--monitor-interval", "2", "--no-python", CLI, "run", "--model", Files.pt2, "--probes",
                   Files.big_probes, "--batch-size", "1", "--db", db]
            agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            ranks, deadline = [], time.monotonic() + 60  # started late on a loaded machine: looked for until then
            while not ranks and time.monotonic() < deadline and agent.poll() is None:
                time.sleep(0.5)
                ranks = [int(p) for p in os.listdir("/proc") if p.isdigit() and self.is_rank(int(p), "1", agent.pid)]
            self.assertEqual(len(ranks), 1, "rank 1 not found")
            time.sleep(4)  # inside its shard
            os.kill(ranks[0], signal.SIGKILL)
            so, se = agent.communicate(timeout=120)
            self.assertNotEqual(agent.returncode, 0)
            self.assertIn("rank 1 on", se)  # rank 0's own message, before torchrun's report
            self.assertEqual(count_runs(db), 0)

    @staticmethod
    def is_rank(pid, rank, agent):
        """An ampscope-cli started by this test's torchrun agent (not another test's ranks) as `rank`."""
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        return os.path.basename(exe) in ("ampscope-cli", "ampscope-cli-engine") and f"RANK={rank}".encode() in env and ppid == agent

    def test_hung_rank_is_named(self):
        """A batch that runs past --batch-timeout (a TorchScript loop that never ends for one sample
        on rank 1's shard): the hung rank's own heartbeat thread tells the others and falls silent."""
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "r.db")
            args = ["run", "--model", Files.looping, "--probes", Files.looping_probes, "--batch-size", "4", "--db",
                    db, "-q", "--batch-timeout", "2", "--lost-after", "60"]
            procs = launch([args, args])
            try:
                t0 = time.monotonic()
                rc, so, se = finish(procs[:1], timeout=120)[0]
                self.assertLess(time.monotonic() - t0, 40)  # not the 60 s of --lost-after
            finally:
                procs[1].kill()
                procs[1].communicate()
            self.assertEqual(rc, 3, se)
            self.assertIn("rank 1 on", se)
            self.assertIn("hung", se)
            self.assertEqual(count_runs(db), 0)


class SameStoreTwice(unittest.TestCase):
    def test_more_ranks_than_batches(self):
        """One batch for two ranks: rank 0 runs it, rank 1 idles, the run says so and is the same."""
        with tempfile.TemporaryDirectory() as d:
            one, two = os.path.join(d, "one.json"), os.path.join(d, "two.json")
            args = ["run", "--model", "demo:mlp", "--probes", "demo", "--batch-size", "64", "--no-db", "-q"]
            one_process(*args, "--json", one)
            p = torchrun(2, *args, "--json", two)
            b = json.load(open(two))
            self.assertEqual([r["samples"] for r in b["ranks"]], [40, 0], p.stderr[-2000:])
            self.assertTrue(any("rank 1 ran no samples" in w for w in b["warnings"]), b["warnings"])
            b["warnings"] = [w for w in b["warnings"] if "ran no samples" not in w]
            close(json.load(open(one)), b)

    def test_second_run_in_the_same_store_does_not_mix(self):
        """Two runs one after the other in one store (hosted here, as torchrun's agent hosts it):
        the second must not read the first's keys (its 'done' would end the second at once)."""
        port = free_port()
        store = torch.distributed.TCPStore("127.0.0.1", port, 3, True, wait_for_workers=False)
        env = {"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RUN_ID": "same"}
        with tempfile.TemporaryDirectory() as d:
            outs = []
            # Another model, batch size (shards 16 + 24, then 20 + 20) and number of passes (2, then 3):
            # a rank reading the first run's hellos, go-aheads or end would run the wrong shard or stop early.
            runs = [("demo:mlp", "8", "fp16"), ("demo:transformer", "4", "fp16,bf16")]
            for i, (model, bs, precision) in enumerate(runs):
                out = os.path.join(d, f"{i}.json")
                args = ["run", "--model", model, "--probes", "demo", "--batch-size", bs, "--precision", precision,
                        "--no-db", "--lost-after", "5"]
                res = finish(launch([args + ["--json", out, "-q"], args + ["-q"]], env, port))
                self.assertEqual(res[1][0], 0, res)
                one_process(*args, "--json", os.path.join(d, f"one{i}.json"), "-q")
                close(json.load(open(os.path.join(d, f"one{i}.json"))), json.load(open(out)))
        del store


if __name__ == "__main__":
    unittest.main()
