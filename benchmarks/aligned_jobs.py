"""The aligned builds one after the other on every core, or side by side on one thread each.

``make aligned`` trains SmolLM2-135M-Instruct and Gemma-3-270m with SFT then DPO. This
benchmark times the same training steps (``stages.sft_batch_loss`` and ``stages.dpo_batch_loss``
on the organisms' instruction data, batches of 8, AdamW, the tied embedding frozen as in the
build) two ways, interleaved over ``--repeats``:

* **one after the other**: each model in its own process with ``--threads`` torch threads
  (default: the machine's cores), the second starting when the first ends (today's build);
* **side by side**: both processes at once, one torch thread each.

Each worker loads its model, then waits at a barrier file, so the clock (started when the
barrier is released, stopped when every worker has written its result) holds training only.
Prints the median wall time of each arm and their ratio. Run:
``python benchmarks/aligned_jobs.py [--steps 8] [--repeats 2]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
MAX_LEN = 64


def worker(model_name: str, threads: int, steps: int, go: Path, out: Path) -> None:
    """Load ``model_name``, wait for ``go``, run ``steps`` SFT then ``steps`` DPO steps, and
    write the training seconds to ``out``."""
    import torch

    torch.set_num_threads(threads)
    from lamina.sources.models import load_model
    from lamina.sources.organisms.curriculum import generate_curriculum
    from lamina.sources.organisms.loop import StageBudget, make_adamw, synchronize
    from lamina.sources.organisms.scoring import model_device
    from lamina.sources.organisms.stages import dpo_batch_loss, sft_batch_loss

    model, tok = load_model(model_name, device="cpu")
    model.get_input_embeddings().weight.requires_grad_(False)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    data = generate_curriculum(0, 1).alignment
    assert data is not None
    sft = [(x.prompt, x.target) for x in data.train]
    dpo = [t.as_tuple() for t in data.dpo_train]
    model.train()
    out.with_suffix(".ready").touch()
    while not go.exists():
        time.sleep(0.05)
    t0 = time.perf_counter()
    opt = make_adamw(model, StageBudget(steps, 8, 1e-5))
    for i in range(2 * steps):
        batch = [(8 * i + k) for k in range(8)]
        if i < steps:
            loss = sft_batch_loss(model, tok, [sft[j % len(sft)] for j in batch], MAX_LEN)
        else:
            loss = dpo_batch_loss(model, ref, tok, [dpo[j % len(dpo)] for j in batch], MAX_LEN, 0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    synchronize(model_device(model))
    out.write_text(json.dumps({"seconds": time.perf_counter() - t0}))


def arm(parallel: bool, threads: int, steps: int) -> float:
    """Wall seconds of both models' training steps, side by side or one after the other."""
    with tempfile.TemporaryDirectory() as tmp:
        total = 0.0
        groups = [list(MODELS)] if parallel else [[m] for m in MODELS]
        for group in groups:
            go = Path(tmp) / f"go-{group[0]}"
            procs, outs = [], []
            for name in group:
                out = Path(tmp) / f"{name}.json"
                cmd = [sys.executable, __file__, "--worker", name, "--threads", str(1 if parallel else threads),
                       "--steps", str(steps), "--go", str(go), "--out", str(out)]  # fmt: skip
                env = {**os.environ, "OMP_NUM_THREADS": str(1 if parallel else threads)}
                procs.append(subprocess.Popen(cmd, env=env))
                outs.append(out)
            while not all(o.with_suffix(".ready").exists() for o in outs):  # every worker loaded
                if any(p.poll() not in (None, 0) for p in procs):
                    raise SystemExit("a worker failed while loading")
                time.sleep(0.2)
            go.touch()
            t0 = time.perf_counter()
            while not all(o.exists() for o in outs):
                if any(p.poll() not in (None, 0) for p in procs):
                    raise SystemExit("a worker failed")
                time.sleep(0.05)
            total += time.perf_counter() - t0
            for p in procs:
                p.wait()
        return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8, help="SFT steps, then as many DPO steps")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--worker", default=None)
    ap.add_argument("--go", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.steps, args.go, args.out)
        return
    times: dict[str, list[float]] = {"one after the other": [], "side by side": []}
    for _ in range(args.repeats):
        times["one after the other"].append(arm(False, args.threads, args.steps))
        times["side by side"].append(arm(True, args.threads, args.steps))
        print({k: [round(t, 1) for t in v] for k, v in times.items()}, flush=True)
    seq, par = (statistics.median(times[k]) for k in times)
    print(f"\n{args.steps} SFT + {args.steps} DPO steps of each of {', '.join(MODELS)}; "
          f"medians of {args.repeats} interleaved repeats")  # fmt: skip
    print(f"one after the other, {args.threads} threads each: {seq:7.1f} s")
    print(f"side by side, 1 thread each:       {par:7.1f} s   {seq / par:4.2f}x faster")


if __name__ == "__main__":
    main()
