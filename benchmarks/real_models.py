"""The two offline pretrained models: load times, sanity checks, extraction and the ablation sweep.

Everything is measured side by side in one run and printed as ratios:

* per model (``smollm2-135m-instruct``, ``gemma-3-270m``): SHA-256 verification time, warm
  load time from the fp32 cache (``--cold`` also times GGUF -> fp32 into an empty cache), layers,
  d_model, parameters, quantisation, and a greedy continuation of "The capital of Germany is";
* extraction on SmolLM2-135M-Instruct: the floor (a bare base-model forward over the same texts
  in the same batches), ``lamina.extract(pool="last")``, Hugging Face ``output_hidden_states``,
  and TransformerLens's ``TransformerBridge`` when ``transformer_lens`` is importable (an
  optional benchmark dependency; the row says so when it is absent);
* the prefix-reuse ablation sweep (``sweep_nll``) against the naive sweep on the 30-layer
  SmolLM2, every layer, ``skip`` and ``interpolate``, with a bit-identity check.

    nice -n 10 python benchmarks/real_models.py [--repeats 3] [--tokens 256] [--cold]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch

import lamina
from lamina.anatomy import sweep_nll
from lamina.sources import gguf_models

MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
SUBJECTS = "the cat|a river|my neighbour|the old bank|a small bird|the storm|the teacher|a bright star".split(
    "|"
)
VERBS = "watched|crossed|remembered|explained|carried|followed|painted|described".split("|")
OBJECTS = "the long bridge|a quiet morning|the red letter|an empty field|the last train|a warm bowl of soup".split(
    "|"
)


def texts(n: int, seed: int = 0) -> list[str]:
    """``n`` English sentences of 4-30 tokens (1-3 clauses), seeded."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        clauses = [
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
            for _ in range(rng.randint(1, 3))
        ]
        out.append((", and ".join(clauses) + ".").capitalize())
    return out


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def model_facts(name: str, cold: bool) -> dict:
    """Verification and load times, shape, quantisation, and a greedy continuation."""
    facts: dict = {"model": name}
    paths = gguf_models.locate_offline(name)
    facts["verify_s"] = _time(lambda: gguf_models._verify_offline(name, paths))
    if cold:
        with tempfile.TemporaryDirectory() as tmp:
            old = os.environ.get("LAMINA_GGUF_CACHE")
            os.environ["LAMINA_GGUF_CACHE"] = tmp
            try:
                facts["cold_load_s"] = _time(lambda: lamina.load_model(name, device="cpu"))
            finally:
                if old is None:
                    os.environ.pop("LAMINA_GGUF_CACHE")
                else:
                    os.environ["LAMINA_GGUF_CACHE"] = old
    lamina.load_model(name, device="cpu")  # make sure the shared cache exists
    t0 = time.perf_counter()
    model, tok = lamina.load_model(name, device="cpu")
    facts["warm_load_s"] = time.perf_counter() - t0
    facts.update(
        layers=model.config.num_hidden_layers,
        d_model=model.config.hidden_size,
        params=sum(p.numel() for p in model.parameters()),
        quantization=model.lamina_source["quantization"],
        sha256=model.lamina_source["sha256"][:16],
    )
    ids = tok("The capital of Germany is", return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    facts["continuation"] = tok.decode(out[0, ids["input_ids"].shape[1] :])
    return facts


def extraction_rows(model, tok, items: list[str], bs: int, repeats: int) -> list[tuple]:
    def batches():
        for i in range(0, len(items), bs):
            yield tok(items[i : i + bs], padding=True, return_tensors="pt")

    def floor():
        with torch.inference_mode():
            for b in batches():
                model.model(**b, use_cache=False)

    def hf():
        with torch.inference_mode():
            for b in batches():
                model(**b, output_hidden_states=True, use_cache=False)

    def ours():
        lamina.extract(model, tok, items, pool="last", batch_size=bs, progress=False)

    methods = {
        "floor (bare forward)": floor,
        "lamina.extract(pool='last')": ours,
        "HF output_hidden_states": hf,
    }
    try:
        from transformer_lens.model_bridge import TransformerBridge  # optional

        bridge = TransformerBridge.boot_transformers(
            model.lamina_source["cache"], hf_model=model, tokenizer=tok, device="cpu"
        )

        def tl():
            with torch.inference_mode():
                for b in batches():
                    bridge.run_with_cache(b["input_ids"])

        methods["TransformerLens TransformerBridge"] = tl
        tl_note = ""
    except Exception as exc:  # not installed, or cannot wrap this model offline
        tl_note = f"TransformerLens TransformerBridge: not measured ({exc.__class__.__name__}: {str(exc)[:120]})"
    times: dict[str, list[float]] = {m: [] for m in methods}
    for fn in methods.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in methods.items():
            times[name].append(_time(fn))
    base = statistics.median(times["floor (bare forward)"])
    rows = [(n, statistics.median(t), statistics.median(t) / base) for n, t in times.items()]
    return rows + ([(tl_note, float("nan"), float("nan"))] if tl_note else [])


def ablation_rows(model, tokens: int, context: int, repeats: int, surgeries: list[str]):
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (max(1, tokens // context), context), generator=gen)
    for surgery in surgeries:
        t = {"naive": [], "prefix": []}
        out = {}
        for _ in range(repeats):
            for method in ("naive", "prefix"):
                t0 = time.perf_counter()
                out[method] = sweep_nll(model, ids, [surgery], method=method, batch_size=8)
                t[method].append(time.perf_counter() - t0)
        (c1, _, a1), (c2, _, a2) = out["naive"], out["prefix"]
        same = np.array_equal(c1, c2) and all(np.array_equal(a1[k], a2[k]) for k in a1)
        n, p = statistics.median(t["naive"]), statistics.median(t["prefix"])
        yield surgery, n, p, n / p, same


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=256, help="tokens per ablation sweep")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--cold", action="store_true", help="also time GGUF -> fp32 (minutes)")
    parser.add_argument("--surgeries", default="skip,interpolate")
    parser.add_argument("--only", choices=["all", "ablation"], default="all")
    args = parser.parse_args()
    print(f"torch threads: {torch.get_num_threads()}, repeats: {args.repeats}")
    print("\n== models")
    for name in MODELS if args.only == "all" else ():
        try:
            f = model_facts(name, args.cold)
        except gguf_models.GGUFMissingError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        cold = f"cold {f['cold_load_s']:.1f} s, " if "cold_load_s" in f else ""
        print(
            f"{name}: {f['layers']} layers, d={f['d_model']}, {f['params'] / 1e6:.1f}M params, "
            f"{f['quantization']}, sha256 {f['sha256']}... verified in {f['verify_s']:.2f} s; "
            f"{cold}warm load {f['warm_load_s']:.1f} s; greedy: {f['continuation']!r}"
        )
    model, tok = lamina.load_model("smollm2-135m-instruct", device="cpu")
    items = texts(args.texts)
    print(f"\n== extraction on smollm2-135m-instruct ({len(items)} texts, batch 32)")
    rows = extraction_rows(model, tok, items, 32, args.repeats) if args.only == "all" else []
    for name, sec, ratio in rows:
        print(f"{name:36s} {sec:8.2f} s {ratio:6.2f}x" if sec == sec else name)
    print(f"\n== ablation sweep on smollm2-135m-instruct (30 layers, {args.tokens} tokens)")
    print(f"{'surgery':12s} {'naive s':>8s} {'prefix s':>8s} {'ratio':>6s} identical")
    surgeries = args.surgeries.split(",")
    for surgery, n, p, r, same in ablation_rows(
        model, args.tokens, args.context, args.repeats, surgeries
    ):
        print(f"{surgery:12s} {n:8.2f} {p:8.2f} {r:5.2f}x {same}", flush=True)


if __name__ == "__main__":
    main()
