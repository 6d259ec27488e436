"""The organisms appendix's sentences: every value its prose quotes, computed from a run's
tables and summaries (:class:`~.run.OrganismsResult`) and glued under ``org_*`` names
(:func:`glue_organisms`), so the notebook only narrates (issue 24 item 4). A sentence states
each number with the target it is compared with; "meets"/"misses" are computed, never typed.
The small table helpers (:func:`pick`, :func:`targets_table`, :func:`shown_bpb`) are shared
with :mod:`~.views`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lamina.book.glue import glue
from lamina.chapters.organisms.run import TARGETS, OrganismsConfig, OrganismsResult
from lamina.sources.organisms.configs import organism_config

__all__ = [
    "glue_organisms",
    "organisms_config",
    "per_organism",
    "pick",
    "shown_bpb",
    "span",
    "targets_table",
]


def organisms_config(params: Mapping[str, Any]) -> OrganismsConfig:
    """The config of the notebook's parameters (pass ``globals()``): every name of ``params``
    that is a field of :class:`OrganismsConfig` (others, e.g. ``results_root``, are ignored)."""
    fields = set(OrganismsConfig.parameter_names())
    return OrganismsConfig.from_params({k: v for k, v in params.items() if k in fields})


def span(values: list[float], fmt: str = "{:.1f}") -> str:
    """'a' or 'a–b': the range of one number over the organisms, each end formatted by ``fmt``
    (one value when both ends format alike)."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def per_organism(result: OrganismsResult, fmt: str, **columns: Mapping[str, Any]) -> str:
    """One clause per organism of ``result`` (in its order), joined by "; ": ``fmt`` takes
    ``name`` and, for each of ``columns`` (organism -> value), that organism's value."""
    return "; ".join(
        fmt.format(name=n, **{k: v[n] for k, v in columns.items()}) for n in result.models
    )


def pick(table: pd.DataFrame, **where: object) -> pd.DataFrame:
    """Rows of ``table`` where every named column equals the given value."""
    keep = pd.Series(True, index=table.index)
    for k, v in where.items():
        keep &= table[k] == v
    return table[keep]


def targets_table(result: OrganismsResult) -> pd.DataFrame:
    """One row per organism and target (``targets`` of each summary): model, target, value,
    threshold, met, and CIs where the target has them."""
    S = result.summaries
    return pd.DataFrame([{"model": m, **t} for m in S for t in S[m]["targets"]])


def shown_bpb(result: OrganismsResult) -> pd.DataFrame:
    """The bits-per-byte rows the page compares: each organism at the end of pretraining and
    every reference model."""
    bpb = result.tables["bits_per_byte"]
    return bpb[(bpb["checkpoint"] == "final") | bpb["model"].isin(list(result.references))].copy()


def glue_organisms(result: OrganismsResult) -> None:
    """Glue every ``org_*`` value the organisms page quotes, section by section (build,
    overlap, perplexity, bits per byte, SFT, DPO, seeds, homographs, targets)."""
    glue("org_names", " and ".join(result.models))
    for part in (_build, _overlap, _perplexity, _bpb, _sft, _dpo, _seeds, _homographs, _targets):
        part(result)


def _build(result: OrganismsResult) -> None:
    """org_build_minutes, org_tokens_seen, org_params (M parameters), org_build_detail."""
    build = result.tables["build"].set_index("model")
    minutes, cpu = build["build_seconds"] / 60, build["cpu_seconds"] / 60
    glue("org_build_minutes", span(minutes.tolist()))
    glue("org_tokens_seen", span(build["tokens_seen"].tolist(), "{:,.0f}"))
    glue("org_params", span((build["parameters"] / 1e6).tolist()) + "M")
    glue(
        "org_build_detail",
        per_organism(
            result,
            "{name} {w:.1f} min wall, {c:.1f} min CPU on {t} thread(s)",
            w=minutes.to_dict(),
            c=cpu.to_dict(),
            t=build["threads"].to_dict(),
        ),
    )


def _overlap(result: OrganismsResult) -> None:
    """org_overlap_detail: shared 8-grams against the target of 0, and glosses found."""
    S = result.summaries
    glue(
        "org_overlap_detail",
        per_organism(
            result,
            "{name}: {v} shared 8-grams ({verdict} target of 0), {g} glosses found",
            v={m: S[m]["eval_8gram_overlap"] for m in S},
            verdict={m: "meets the" if S[m]["eval_8gram_overlap"] == 0 else "misses the" for m in S},
            g={m: S[m]["gloss_hits"] for m in S},
        ),
    )


def _perplexity(result: OrganismsResult) -> None:
    """org_ppl, org_unigram, org_ppl_frac (%), org_{lm,sft,dpo}_ppl, org_sft_ratio_detail."""
    quality = result.tables["quality"]
    final = pick(quality, checkpoint="final")
    glue("org_ppl", span(final["val_perplexity"].tolist()))
    glue("org_unigram", span(final["unigram_perplexity"].tolist()))
    glue("org_ppl_frac", span((100 * final["fraction_of_unigram"]).tolist(), "{:.0f}") + "%")
    for ck in ("lm", "sft", "dpo"):
        glue(f"org_{ck}_ppl", span(pick(quality, checkpoint=ck)["val_perplexity"].tolist()))
    ratios = {ck: pick(quality, checkpoint=ck).set_index("model")["ratio_to_base"].to_dict()
              for ck in ("sft", "dpo")}  # fmt: skip
    target = TARGETS["sft_ppl_ratio"]
    glue(
        "org_sft_ratio_detail",
        per_organism(
            result,
            "{name} @sft {r:.2f}× ({v} the target), @dpo {d:.2f}×",
            r=ratios["sft"],
            v={m: "meets" if r <= target else "misses" for m, r in ratios["sft"].items()},
            d=ratios["dpo"],
        ),
    )


def _bpb(result: OrganismsResult) -> None:
    """org_bpb_text (the scored text, in words), org_bpb_plays_n, org_context (tokens),
    org_bpb_detail (every shown model's bits per byte with CIs) and org_bpb_compare."""
    bdocs = result.tables["bpb_documents"]
    one_model = bdocs[bdocs["model"] == bdocs["model"].iloc[0]]
    one_model = one_model[one_model["checkpoint"] == one_model["checkpoint"].iloc[0]]
    n_by = one_model.groupby("source")["document"].nunique().to_dict()
    glue(
        "org_bpb_text",
        f"{(one_model['source'] == 'plays').sum()} passages of about "
        f"{result.config.ref_passage_chars} "
        f"characters from {n_by.get('plays', 0)} validation plays and "
        f"{n_by.get('curriculum', 0)} validation curriculum documents, "
        f"{int(one_model['bytes'].sum()):,} scored bytes in all",
    )
    glue("org_bpb_plays_n", str(n_by.get("plays", 0)))
    contexts = [float(organism_config(m).context) for m in result.summaries]
    glue("org_context", span(contexts, "{:.0f}"))
    shown, refs = shown_bpb(result), list(result.references)
    glue(
        "org_bpb_detail",
        "; ".join(
            f"`{m}`" + ("" if m in refs else " (end of pretraining)") + ": "
            + ", ".join(_bpb_clause(r) for _, r in g[g["source"] != "all"].iterrows())
            for m, g in shown.groupby("model", sort=False)
        ),
    )
    sources = [x for x in ("plays", "curriculum") if x in set(shown["source"])]
    said = "; ".join(_bpb_compare(result, shown, x) for x in sources) if refs else ""
    glue(
        "org_bpb_compare",
        said[:1].upper() + said[1:] + "." if said else "No reference model was scored.",
    )


def _bpb_clause(r: pd.Series) -> str:
    """'b (95% CI lo–hi) on the source' for one bits-per-byte row (no CI when it is NaN)."""
    ci = "" if np.isnan(r["ci_low"]) else f" (95% CI {r['ci_low']:.2f}–{r['ci_high']:.2f})"
    return f"{r['bits_per_byte']:.2f}{ci} on the {r['source']}"


def _bpb_compare(result: OrganismsResult, shown: pd.DataFrame, source: str) -> str:
    """Each organism's bits per byte against the lowest reference model's, on one source:
    the ratio, and whether their 95% CIs are apart or overlap."""
    t = shown[shown["source"] == source].set_index("model")
    best = t.loc[list(result.references), "bits_per_byte"].idxmin()
    r = t.loc[best]

    def ci(m: str) -> str:
        apart = t.loc[m, "ci_low"] > r["ci_high"] or t.loc[m, "ci_high"] < r["ci_low"]
        return "CIs apart" if apart else "CIs overlap"

    bits = t["bits_per_byte"]
    ratios = ", ".join(
        f"`{m}` {bits[m]:.2f}, {bits[m] / bits[best]:.2f}× as many ({ci(m)})"
        for m in result.summaries
    )
    return (
        f"on the {source}, the lowest reference model is `{best}` at {bits[best]:.2f} bits per "
        f"byte; {ratios}"
    )


def _by_checkpoint(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """checkpoint -> {model: accuracy} of a table's rows."""
    return {
        ck: dict(zip(t["model"], t["accuracy"], strict=True))
        for ck, t in table.groupby("checkpoint")
    }


def _glue_accuracies(
    result: OrganismsResult, stage: str, spans: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """Glue ``org_n_<stage>`` (items scored per organism) and ``org_<stage>_<name>`` (the span
    over organisms of the accuracy at checkpoint ``spans[name]``) from the table
    ``<stage>_accuracy``; -> (its rows of component "all", checkpoint -> {model: accuracy})."""
    rows = pick(result.tables[f"{stage}_accuracy"], component="all")
    acc = _by_checkpoint(rows)
    glue(f"org_n_{stage}", span(rows["n"].tolist(), "{:.0f}"))
    for name, checkpoint in spans.items():
        glue(f"org_{stage}_{name}", span(list(acc[checkpoint].values()), "{:.3f}"))
    return rows, acc


def _sft(result: OrganismsResult) -> None:
    """org_n_sft, org_sft_base, org_sft_acc, org_sft_majority, org_sft_detail (accuracy, CI,
    the paired gain over the majority answer and whether its CI is above 0)."""
    S = result.summaries
    spans = {"base": "final", "acc": "sft", "majority": "majority answer"}
    sft_all, acc = _glue_accuracies(result, "sft", spans)
    tuned = pick(sft_all, checkpoint="sft").set_index("model")
    gain = {m: S[m]["sft_gain_over_majority"] for m in S}
    glue(
        "org_sft_detail",
        per_organism(
            result,
            "{name} {a:.3f} (95% CI {lo:.3f}–{hi:.3f}) against {m:.3f}, a gain of {g[0]:+.3f} "
            "(95% CI {g[1]:+.3f} to {g[2]:+.3f}), which {v} the target of a gain above 0",
            a=acc["sft"],
            lo=tuned["ci_low"].to_dict(),
            hi=tuned["ci_high"].to_dict(),
            m=acc["majority answer"],
            g=gain,
            v={m: "meets" if g[1] > 0 else "misses" for m, g in gain.items()},
        ),
    )


def _dpo(result: OrganismsResult) -> None:
    """org_n_dpo, org_dpo_base, org_dpo_sft, org_dpo_acc, org_dpo_detail (against
    ``TARGETS["dpo_preference_accuracy"]``) and org_margin_detail (reward margins, nats)."""
    S = result.summaries
    target = TARGETS["dpo_preference_accuracy"]
    dpo_all, _ = _glue_accuracies(result, "dpo", {"base": "final", "sft": "sft", "acc": "dpo"})
    d = pick(dpo_all, checkpoint="dpo").set_index("model")
    glue(
        "org_dpo_detail",
        per_organism(
            result,
            "{name} {a:.3f} (95% CI {lo:.3f}–{hi:.3f}), which {v} the target of {t}",
            a=d["accuracy"].to_dict(),
            lo=d["ci_low"].to_dict(),
            hi=d["ci_high"].to_dict(),
            v={m: "meets" if a >= target else "misses" for m, a in d["accuracy"].items()},
            t={m: target for m in S},
        ),
    )
    margins = result.tables["dpo_margins"]
    mg = {m: {r["pairs"]: r for r in margins[margins["model"] == m].to_dict("records")} for m in S}
    glue(
        "org_margin_detail",
        per_organism(
            result,
            "{name}: {tr[reward_margin]:.2f} nats on training pairs (95% CI "
            "{tr[margin_ci_low]:.2f}–{tr[margin_ci_high]:.2f}) and {he[reward_margin]:.2f} on "
            "held-out pairs ({he[margin_ci_low]:.2f}–{he[margin_ci_high]:.2f}), reward accuracy "
            "{he[reward_accuracy]:.3f} held out",
            tr={m: mg[m]["training"] for m in S},
            he={m: mg[m]["held-out"] for m in S},
        ),
    )


def _seed_spread(seeds: pd.DataFrame, m: str) -> str:
    """One organism's training seeds: their count and the range of each build-time number."""
    rows = seeds[seeds["model"] == m]
    if len(rows) < 2:
        return f"{m}: one training seed"
    parts = [
        f"{col} {rows[col].min():.3g}–{rows[col].max():.3g}"
        for col in ("val_perplexity", "sft_ppl_ratio", "sft_accuracy", "dpo_preference_accuracy")
    ]
    return f"{m}: {len(rows)} training seeds, ranges " + ", ".join(parts)


def _seeds(result: OrganismsResult) -> None:
    """org_seed_detail."""
    seeds = result.tables["seeds"]
    glue("org_seed_detail", "; ".join(_seed_spread(seeds, m) for m in result.summaries))


def _homographs(result: OrganismsResult) -> None:
    """org_n_words, org_homograph_detail (separated homographs, median ratio with its CI,
    Wilcoxon p)."""
    S = result.summaries
    glue("org_n_words", str(result.tables["homographs"]["word"].nunique()))
    glue(
        "org_homograph_detail",
        per_organism(
            result,
            "{name}: {k} of {n} homographs are separated beyond their control (median ratio "
            "{r[0]:.2f}, 95% CI {r[1]:.2f}–{r[2]:.2f}; Wilcoxon signed-rank p = {p:.3g})",
            k={m: S[m]["homographs_separated"] for m in S},
            n={m: S[m]["homographs"] for m in S},
            r={m: S[m]["homograph_median_ratio"] for m in S},
            p={m: S[m]["homograph_wilcoxon_p"] for m in S},
        ),
    )


GATED = (("sft", "sft"), ("dpo", "preference"))
"""The (checkpoint, gate) pairs with a target: the SFT gate at ``@sft``, the preference gate
(preference accuracy and content probe) at ``@dpo``."""


def gate_detail(gates: pd.DataFrame) -> str:
    """One entry per organism and targeted gate (:data:`GATED`): "<model> @<checkpoint> <gate>
    gate: passed|failed: <first check>", cut from the gate's ``reason`` (its first two
    colon-separated clauses; the whole reason is in the gate table)."""
    parts = []
    for r in gates.itertuples():
        if (r.checkpoint, r.gate) in GATED:
            head = ": ".join(str(r.reason).split(": ")[:2])
            parts.append(f"{r.model} @{r.checkpoint} {r.gate} gate: {head}")
    return "; ".join(parts) or "no gate was measured"


def _targets(result: OrganismsResult) -> None:
    """org_targets_met ('n of N'), org_missed (each missed target, or "none"),
    org_gate_detail (:func:`gate_detail`)."""
    glue("org_gate_detail", gate_detail(result.tables.get("gates", pd.DataFrame())))
    targets = targets_table(result)
    glue("org_targets_met", f"{int(targets['met'].sum())} of {len(targets)}")
    glue(
        "org_missed",
        "; ".join(f"{r.model}: {r.target}" for r in targets.itertuples() if not r.met) or "none",
    )
