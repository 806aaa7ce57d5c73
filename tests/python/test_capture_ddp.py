# SPDX-License-Identifier: MIT
"""Which rank, under torchrun: two CPU ranks (gloo) train a DistributedDataParallel model;
rank 1's batch of step K holds a NaN, which the all-reduce spreads to rank 0's gradients.
Capture.watch_ddp checks each rank's own gradients before the all-reduce: the one bundle is
rank 1's, and it names rank 1 (not 0) as where the incident started. Gloo sometimes aborts at
interpreter exit after the work is done: each rank writes done<rank>.json when its work is
over, and a non-zero exit is accepted only when both did."""
import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import read

HERE = os.path.dirname(os.path.abspath(__file__))
K = 3


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(), reason="no gloo backend")
def test_the_bundle_names_the_rank_it_started_on(tmp_path):
    out, done = tmp_path / "incidents", tmp_path / "done"
    done.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        os.path.join(HERE, "ddp_job.py"), str(out), str(done)], capture_output=True, text=True, timeout=300, env=env,
                       stdin=subprocess.DEVNULL)
    finished = sorted(os.listdir(done))
    assert finished == ["done0.json", "done1.json"], f"rc {p.returncode}\n{p.stdout}\n{p.stderr[-4000:]}"
    if p.returncode != 0:  # only an abort after both ranks finished their work
        assert "gloo" in p.stderr.lower() or "signal" in p.stderr.lower(), p.stderr[-4000:]
    results = {}
    for f in finished:
        with open(done / f) as fh:
            r = json.load(fh)
        results[r["rank"]] = r["bundles"]
    assert results[0] == [], "rank 0 only received the NaN through the all-reduce: it writes nothing"
    assert [os.path.basename(b) for b in results[1]] == [f"incident-step{K}-rank1"]
    inc = read(results[1][0])
    assert (inc["rank"], inc["world_size"], inc["detected"]["what"]) == (1, 2, "loss")
    assert inc["origin_ranks"] == [1]
    assert inc["local"] == {"loss": True, "grads": True}
    assert [(r["rank"], r["step"], r["loss"], r["grads"]) for r in inc["ranks"]] == [(0, K, False, False), (1, K, True, True)]
    ckpt = torch.load(os.path.join(results[1][0], "checkpoint.pt"), weights_only=True)
    assert sorted(ckpt["model"]) == ["fc1.bias", "fc1.weight", "head.bias", "head.weight"], "the module's names, not DDP's"
