"""Paper 2's mechanism on the organisms: gradient geometry per objective, Adam's update against
its momentum, and write gradients across pretraining. Part of
:mod:`lamina.experiments.weight_signature` (same config, same tables conventions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from lamina.book import verdict
from lamina.experiments.weight_signature_claims import (
    _keep_layers,
    _row,
    _summary,
    close_verdict,
    combine,
)
from lamina.gradients import adam_update_direction, gradient_factors, gradient_geometry
from lamina.weights import (
    LinearMap,
    linear_maps,
    principal_basis,
    relative_subspace_fraction,
)

if TYPE_CHECKING:
    from lamina.experiments.weight_signature import Checkpoints, ModelPair, SignatureConfig

# Columns of the tables that a pair without training history leaves empty.
WRITE_GRADIENT_COLUMNS = [
    "step", "checkpoint", "key", "layer", "role", "kind", "k", "d", "rsf_summed",
    "rsf_token_mean", "rsf_token_pooled", "cancellation", "enrichment_summed",
    "enrichment_token_mean", "enrichment_token_pooled", "activation_share", "weight_rsf",
    "weight_enrichment",
]  # fmt: skip
ADAM_COLUMNS = [
    "state", "checkpoint", "step", "key", "layer", "role", "kind", "k", "d", "rsf_momentum",
    "rsf_update", "enrichment_momentum", "enrichment_update",
]  # fmt: skip

__all__ = [
    "activation_share",
    "adam_signature",
    "mechanism_claims",
    "objective_gradients",
    "objective_loss",
    "write_gradients_across_training",
]


def activation_share(moment: torch.Tensor, k: int) -> float:
    """Share of the input energy in the top-k principal directions: Σ_{i<=k} λ_i / Σ_i λ_i of
    the (d, d) second moment (the RSF the input side of a per-token gradient term has on
    average when every δ_t has the same norm)."""
    eig = torch.linalg.eigvalsh(moment.to(torch.float64)).flip(0).clamp_min(0)
    return float(eig[:k].sum() / eig.sum())


def _prompt_lengths(tok: Any, prompts: Sequence[str]) -> torch.Tensor:
    return torch.tensor([len(tok(p)["input_ids"]) for p in prompts])


def _completion_mask(ids: torch.Tensor, mask: torch.Tensor, plen: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(ids.shape[1], device=ids.device)[None, :]
    return ((pos >= plen[:, None].to(ids.device)) & mask.bool()).long()


def fitting_items(tok: Any, items: Sequence[tuple], max_length: int) -> list[tuple]:
    """The (question, answer, ...) items whose prompt + every answer fit in ``max_length`` tokens."""
    from lamina.organisms.corpus import format_answer, format_prompt

    return [
        it
        for it in items
        if all(
            len(tok(format_prompt(it[0]) + format_answer(a))["input_ids"]) <= max_length
            for a in it[1:]
        )
    ]


def objective_loss(
    objective: str,
    tok: Any,
    texts_or_items: Sequence[Any],
    dpo_beta: float = 0.1,
    max_length: int | None = None,
) -> tuple[list[str], str | Callable]:
    """(texts, loss) for :func:`lamina.gradients.gradient_factors` under one objective.

    lm: texts as given, next-token loss. sft: items (question, answer) rendered as prompt +
    answer, loss on the answer tokens (:func:`lamina.organisms.objectives.sft_loss`). dpo:
    items (prompt, chosen, rejected) as 2n rows (chosen, then rejected); the DPO loss with the
    reference equal to the model itself (its value is log 2; its gradient is the first step
    of DPO from this checkpoint). Items whose rendering exceeds ``max_length`` tokens are
    dropped (truncation would cut their answer off).
    """
    from lamina.organisms.corpus import format_answer, format_prompt
    from lamina.organisms.objectives import dpo_loss, sequence_logprob, sft_loss

    if objective == "lm":
        return list(texts_or_items), "lm"
    if max_length is not None:
        texts_or_items = fitting_items(tok, texts_or_items, max_length)
        if not texts_or_items:
            raise ValueError(f"every {objective} item is longer than {max_length} tokens")
    if objective == "sft":
        prompts = [format_prompt(q) for q, _ in texts_or_items]
        texts = [p + format_answer(a) for p, (_, a) in zip(prompts, texts_or_items, strict=True)]
        plen = _prompt_lengths(tok, prompts)

        def sft(logits, ids, mask):
            return sft_loss(logits, ids, _completion_mask(ids, mask, plen))

        return texts, sft
    if objective == "dpo":
        prompts = [format_prompt(p) for p, _, _ in texts_or_items]
        texts = [p + format_answer(c) for p, (_, c, _) in zip(prompts, texts_or_items, strict=True)]
        texts += [
            p + format_answer(r) for p, (_, _, r) in zip(prompts, texts_or_items, strict=True)
        ]
        plen = _prompt_lengths(tok, prompts * 2)
        n = len(prompts)

        def dpo(logits, ids, mask):
            lp = sequence_logprob(logits, ids, _completion_mask(ids, mask, plen))
            ref = lp.detach()
            return dpo_loss(lp[:n], lp[n:], ref[:n], ref[n:], dpo_beta)

        return texts, dpo
    raise ValueError(f"objective must be 'lm', 'sft' or 'dpo'; got {objective!r}")


def _bases(
    model, maps: Sequence[LinearMap], moments: dict, k: int, centred: bool
) -> dict[str, tuple]:
    from lamina.experiments.weight_signature_deltas import prediction_subspace

    pred = prediction_subspace(model, k, centred)
    return {
        m.key: (principal_basis(moments[m.key], k), "input")
        if m.kind == "read"
        else (pred, "output")
        for m in maps
    }


def _geometry_rows(factors, maps, bases, moments, k: int) -> list[dict[str, Any]]:
    rows = []
    for m in maps:
        basis, side = bases[m.key]
        d = basis.shape[0]
        f = factors[m.key]
        g = gradient_geometry(f.deltas, f.acts, basis, side)
        row = {"key": m.key, "layer": m.layer, "role": m.role, "kind": m.kind, "k": k, "d": d}
        row |= {name: getattr(g, name) for name in g.__dataclass_fields__}
        for name in ("rsf_summed", "rsf_token_mean", "rsf_token_pooled"):
            row[name.replace("rsf", "enrichment")] = row[name] / (k / d)
        row["activation_share"] = (
            activation_share(moments[m.key], k) if m.kind == "read" else float("nan")
        )
        rows.append(row)
    return rows


def objective_gradients(
    ck: Checkpoints | ModelPair, texts: list[str], config: SignatureConfig, cache: dict
) -> pd.DataFrame:
    """Gradient geometry of every block map at ``config.base`` under the lm, sft and dpo
    objectives, at k = ``config.k`` (read maps in their input principal subspace, write maps
    in the prediction subspace). One row per objective × map: RSF of the summed gradient,
    mean and energy-pooled per-token RSF, cancellation, and the activation share
    (:func:`activation_share`) of read maps. The SFT and DPO items are the corpus's
    (``ck.corpus()``; for a real pair, lamina's curriculum)."""
    from lamina.experiments.weight_signature import context_length
    from lamina.experiments.weight_signature_deltas import _moments

    spec = ck.spec(config.base)
    model, tok = ck.load(spec)
    maps = [m for m in linear_maps(model, embeddings=False)]
    moments = _moments(model, tok, texts, config.centred, cache, spec)
    bases = _bases(model, maps, moments, config.k, config.centred)
    corpus = ck.corpus()
    rng = np.random.default_rng(config.seed)
    lm_texts = _token_budget(tok, texts, config.grad_tokens, context_length(model))
    samples = {
        "lm": lm_texts,
        "sft": [corpus.sft[i] for i in rng.permutation(len(corpus.sft))[: 4 * config.grad_pairs]],
        "dpo": [corpus.dpo[i] for i in rng.permutation(len(corpus.dpo))[: 2 * config.grad_pairs]],
    }
    rows = []
    caps = {"sft": config.grad_pairs, "dpo": max(1, config.grad_pairs // 2)}
    for objective, items in samples.items():
        if objective in caps:
            items = fitting_items(tok, items, context_length(model))[: caps[objective]]
        batch, loss = objective_loss(objective, tok, items, ck.dpo_beta, context_length(model))
        factors = gradient_factors(model, tok, batch, maps, loss, max_length=context_length(model))
        for row in _geometry_rows(factors, maps, bases, moments, config.k):
            rows.append({"objective": objective, "checkpoint": spec, **row})
    return pd.DataFrame(rows)


def _token_budget(tok, texts: list[str], n_tokens: int, max_length: int) -> list[str]:
    out, count = [], 0
    for t in texts:
        out.append(t)
        count += min(len(tok(t)["input_ids"]), max_length)
        if count >= n_tokens:
            break
    return out


def write_gradients_across_training(
    ck: Checkpoints | ModelPair, texts: list[str], config: SignatureConfig
) -> pd.DataFrame:
    """At every pretraining checkpoint: the LM gradient of each write map against that
    checkpoint's prediction subspace (k = ``config.k``), and the write weight itself
    (``weight_rsf`` = RSF of W, ``weight_enrichment``) against the same subspace.
    Empty (with its columns) for a pair without pretraining checkpoints."""
    from lamina.experiments.weight_signature import context_length

    if not ck.steps:
        return pd.DataFrame(columns=WRITE_GRADIENT_COLUMNS)

    rows = []
    for step, spec in sorted(ck.steps.items()):
        model, tok = ck.load(spec)
        maps = [m for m in linear_maps(model, embeddings=False) if m.kind == "write"]
        bases = _bases(model, maps, {}, config.k, config.centred)
        batch = _token_budget(tok, texts, config.grad_tokens, context_length(model))
        factors = gradient_factors(model, tok, batch, maps, "lm", max_length=context_length(model))
        for row in _geometry_rows(factors, maps, bases, {}, config.k):
            w = maps[[m.key for m in maps].index(row["key"])].weight(model)
            row["weight_rsf"] = relative_subspace_fraction(w, bases[row["key"]][0], "output")
            row["weight_enrichment"] = row["weight_rsf"] / (config.k / row["d"])
            rows.append({"step": step, "checkpoint": spec, **row})
    return pd.DataFrame(rows)


def adam_signature(
    ck: Checkpoints | ModelPair, texts: list[str], config: SignatureConfig, cache: dict
) -> pd.DataFrame:
    """Adam's update direction u = m̂/(√v̂+ε) (:func:`lamina.gradients.adam_update_direction`)
    against its first moment m (the momentum-averaged raw gradient), from the optimiser
    state saved with the base checkpoint (late pretraining) and with each target stage.
    One row per state × block map: RSF and enrichment of m and of u at k = ``config.k``.
    Empty (with its columns) for a pair without saved optimiser state."""
    from lamina import organisms
    from lamina.experiments.weight_signature_deltas import _moments

    if not ck.has_optimizer_state:
        return pd.DataFrame(columns=ADAM_COLUMNS)
    betas = ck.betas
    rows = []
    for label in (config.base, *config.targets):
        spec = ck.spec(label)
        state = organisms.load_optimizer_state(spec)
        model, tok = ck.load(spec)
        maps = linear_maps(model, embeddings=False)
        moments = _moments(model, tok, texts, config.centred, cache, spec)
        bases = _bases(model, maps, moments, config.k, config.centred)
        for m in maps:
            st = state.get(m.parameter)
            if st is None or int(st["step"]) < 1:
                continue
            basis, side = bases[m.key]
            mom = m.as_matrix(st["exp_avg"])
            upd = m.as_matrix(
                adam_update_direction(st["exp_avg"], st["exp_avg_sq"], int(st["step"]), betas)
            )
            d = basis.shape[0]
            r_m = relative_subspace_fraction(mom, basis, side)
            r_u = relative_subspace_fraction(upd, basis, side)
            rows.append(
                {
                    "state": label,
                    "checkpoint": spec,
                    "step": int(st["step"]),
                    "key": m.key,
                    "layer": m.layer,
                    "role": m.role,
                    "kind": m.kind,
                    "k": config.k,
                    "d": d,
                    "rsf_momentum": r_m,
                    "rsf_update": r_u,
                    "enrichment_momentum": r_m / (config.k / d),
                    "enrichment_update": r_u / (config.k / d),
                }
            )
    return pd.DataFrame(rows)


def mechanism_claims(
    model: str, parts: dict, config: SignatureConfig, ck: Checkpoints | ModelPair
) -> list[dict[str, Any]]:
    """Verdict rows of the mechanism claims (see :data:`lamina.experiments.weight_signature_claims.CLAIMS`)."""
    g, m = _keep_layers(parts["gradients"], config), config.random_margin
    rows = []
    read = g[g["kind"] == "read"]
    geo_by_obj = {}
    for obj, t in read.groupby("objective", sort=False):
        s = _summary(t["rsf_summed"] / t["activation_share"], config)
        geo_by_obj[obj] = _summary(t["enrichment_summed"], config)["geo"]
        rows.append(
            _row(
                "read_grad_inherits",
                model,
                f"{obj} objective @{config.base}",
                "≈ activation spectrum",
                s["geo"],
                s,
                s["p_two"],
                close_verdict(s, m),
                geo_by_obj[obj],
                "summed read-gradient enrichment",
                unit="RSF(summed gradient) / activation share",
            )
        )
    if geo_by_obj:
        spread = max(geo_by_obj.values()) / min(geo_by_obj.values())
        piv = read.pivot_table(index="key", columns="objective", values="rsf_summed")
        p = (
            float(sps.friedmanchisquare(*[piv[c] for c in piv]).pvalue)
            if piv.shape[1] >= 3
            else None
        )
        rows.append(
            _row(
                "read_grad_inherits",
                model,
                "across objectives",
                "same under every objective",
                spread,
                None,
                p,
                "reproduced"
                if spread <= m
                else "partially"
                if spread <= m * m
                else "not reproduced",
                note="max/min summed read-gradient enrichment",
                unit="max/min ratio",
            )
        )
    lm = read[read["objective"] == "lm"]
    if len(lm) >= 3:
        x, y = lm["activation_share"].to_numpy(), lm["rsf_summed"].to_numpy()
        rho, p = sps.spearmanr(x, y)
        boot = sps.bootstrap(
            (x, y),
            lambda a, b: sps.spearmanr(a, b)[0],
            paired=True,
            vectorized=False,
            n_resamples=min(config.n_bootstrap, 1000),
            method="percentile",
            rng=np.random.default_rng(config.seed),
        )
        s = {
            "ci_low": float(boot.confidence_interval.low),
            "ci_high": float(boot.confidence_interval.high),
        }
        enr = _summary(lm["enrichment_summed"], config)
        rows.append(
            _row(
                "raw_read_grad_follows",
                model,
                f"lm objective @{config.base}",
                "follows",
                float(rho),
                s,
                float(p),
                verdict(float(p), bool(rho > 0 and enr["geo"] > 1))
                if rho > 0
                else "not reproduced",
                enr["geo"],
                "summed read-gradient enrichment",
                unit="Spearman ρ(activation share, gradient RSF) over read matrices",
            )
        )
    a = _keep_layers(parts["adam"], config)
    for state, t in a[a["kind"] == "read"].groupby("state", sort=False):
        s = _summary(t["enrichment_update"] / t["enrichment_momentum"], config)
        word = "not reproduced" if s["geo"] >= 1 else verdict(s["p_less"], bool(s["ci_high"] < 1))
        rows.append(
            _row(
                "optimizer_attenuates",
                model,
                f"Adam state @{state}",
                "update < raw",
                s["geo"],
                s,
                s["p_less"],
                word,
                unit="enrichment(update) / enrichment(momentum)",
            )
        )
    for obj, t in g.groupby("objective", sort=False):
        s = _summary(t["rsf_summed"] / t["rsf_token_pooled"], config)
        canc = float(t["cancellation"].median())
        word = combine(["reproduced" if canc < 0.5 else "not reproduced", close_verdict(s, m)])
        rows.append(
            _row(
                "cancellation_scale_not_direction",
                model,
                f"{obj} objective @{config.base}",
                "scale only",
                s["geo"],
                s,
                s["p_two"],
                word,
                canc,
                "median cancellation",
                unit="RSF(summed) / RSF(per-token, pooled)",
            )
        )
    w = _keep_layers(parts["write_gradients"], config)
    early_cut, late_cut = config.early_fraction * ck.total, config.late_fraction * ck.total
    e = _summary(w[(w["step"] > 0) & (w["step"] <= early_cut)]["enrichment_summed"], config)
    lt = _summary(w[w["step"] >= late_cut]["enrichment_summed"], config)
    if np.isfinite(e["geo"]) and np.isfinite(lt["geo"]):
        early_v = w[(w["step"] > 0) & (w["step"] <= early_cut)]["enrichment_summed"]
        p = float(
            sps.mannwhitneyu(
                np.log(early_v),
                np.log(w[w["step"] >= late_cut]["enrichment_summed"]),
                alternative="greater",
            ).pvalue
        )
        ok = e["geo"] > m and lt["geo"] <= m
        word = "not reproduced" if e["geo"] <= lt["geo"] else verdict(p, ok)
    else:
        p, word = None, "not testable"
    rows.append(
        _row(
            "write_grad_early_only",
            model,
            "pretraining",
            "early only",
            e["geo"] / lt["geo"],
            None,
            p,
            word,
            lt["geo"],
            "late write-gradient enrichment",
            note=f"early enrichment {e['geo']:.2f}",
            unit="early / late write-gradient enrichment",
        )
    )
    by_step = w.groupby("step")["weight_enrichment"].apply(
        lambda v: float(np.exp(np.log(v).mean()))
    )
    early_steps = [s for s in by_step.index if 0 < s <= early_cut]
    if early_steps and 0 in by_step.index and by_step.index.max() > 0:
        e0, ee, ef = by_step[0], by_step[max(early_steps)], by_step[by_step.index.max()]
        frac = (ee - e0) / (ef - e0) if ef != e0 else float("nan")
        x0 = w[w["step"] == 0].set_index("key")["weight_enrichment"]
        xe = w[w["step"] == max(early_steps)].set_index("key")["weight_enrichment"]
        p = float(sps.wilcoxon(np.log(xe), np.log(x0.loc[xe.index]), alternative="greater").pvalue)
        word = "not reproduced" if not ef > e0 else verdict(p, bool(frac >= 0.5))
    else:
        frac, p, word, ef = float("nan"), None, "not testable", float("nan")
    rows.append(
        _row(
            "write_weights_acquire_early",
            model,
            "pretraining",
            "early",
            frac,
            None,
            p,
            word,
            ef,
            "final write-weight enrichment",
            unit="share of the final write-weight enrichment gain reached early",
        )
    )
    return rows
