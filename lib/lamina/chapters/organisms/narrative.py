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
from lamina.chapters.organisms.run import TARGETS, OrganismsResult
from lamina.evidence.claims import SELF_VERDICTS
from lamina.sources.organisms.configs import organism_config

__all__ = [
    "gate_outcomes",
    "glue_organisms",
    "per_organism",
    "pick",
    "shown_bpb",
    "span",
    "stage_detail",
    "targets_table",
]


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
    threshold, the engine's verdict of the self-check, and CIs where it has them."""
    S = result.summaries
    return pd.DataFrame([{"model": m, **t} for m in S for t in S[m]["targets"]])


def shown_bpb(result: OrganismsResult) -> pd.DataFrame:
    """The bits-per-byte rows the page compares: each organism at the end of pretraining and
    every reference model."""
    bpb = result.tables["bits_per_byte"]
    return bpb[(bpb["checkpoint"] == "final") | bpb["model"].isin(list(result.references))].copy()


def glue_organisms(result: OrganismsResult) -> None:
    """Glue every ``org_*`` value the organisms page quotes, section by section (build,
    overlap, perplexity, bits per byte, the stage gates, seeds, homographs, targets)."""
    glue("org_names", " and ".join(result.models))
    for part in (_build, _overlap, _perplexity, _bpb, _stages, _seeds, _homographs, _targets):
        part(result)


def _build(result: OrganismsResult) -> None:
    """org_build_minutes, org_tokens_seen, org_params (M parameters), org_build_detail."""
    build = result.tables["build"].set_index("model")
    minutes, cpu = build["build_seconds"] / 60, build["cpu_seconds"] / 60
    glue("org_build_minutes", span(minutes.tolist()))
    glue("org_tokens_seen", span(build["tokens_seen"].tolist(), "{:,.0f}"))
    glue("org_params", span((build["parameters"] / 1e6).tolist()) + "M")
    per_stage = build.filter(regex="^(pretrain|lm|sft|dpo|evaluation)_seconds$") / 60  # one run
    stages = {n: ", ".join(f"{c[:-8]} {v:.1f}" for c, v in r.dropna().items())
              for n, r in per_stage.iterrows()}  # fmt: skip
    glue("org_build_detail", per_organism(
        result, "{name} {w:.1f} min wall{s}, {c:.1f} min CPU on {t} thread(s)", w=minutes.to_dict(),
        s={k: f" (minutes per stage: {v})" if v else "" for k, v in stages.items()},
        c=cpu.to_dict(), t=build["threads"].to_dict()))  # fmt: skip


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


def _stage_spans(result: OrganismsResult) -> None:
    """org_n_sft, org_n_dpo (held-out items and triples), org_n_units (each organism's held-out
    entity pairs), and the span over organisms of each stage's accuracies: org_sft_{base,acc,blind}
    (SFT accuracy; the best content-blind policy's), org_probe_ (content probe), org_pref_
    (preference accuracy), org_refusal_ (greedy refusals on people questions) {base,sft,acc}."""
    g = result.tables["gates"]
    g = g[g["model"].isin(result.models)]  # the organisms (the aligned real models: the detail)
    pol = result.tables["sft_accuracy"]
    blind = pick(pol[pol["checkpoint"].str.startswith("content-blind")], component="all")
    glue("org_n_sft", span(g["n_items"].tolist(), "{:.0f}"))
    glue("org_n_dpo", span(g["n_triples"].tolist(), "{:.0f}"))
    glue("org_n_units", span(g.groupby("model")["n_units"].max().tolist(), "{:.0f}"))  # all held-out pairs
    glue("org_sft_blind", span(blind["accuracy"].tolist(), "{:.3f}"))
    for stage, key in (("base", "base"), ("sft", "sft"), ("dpo", "acc")):
        rows = g[g["stage"] == stage]
        if stage != "dpo":
            glue(f"org_sft_{key if stage == 'base' else 'acc'}", span(rows["sft_accuracy"].tolist(), "{:.3f}"))
        glue(f"org_probe_{key}", span(rows["content_probe"].tolist(), "{:.3f}"))
        glue(f"org_pref_{key}", span(rows["preference_accuracy"].tolist(), "{:.3f}"))
        refusals = rows["refusal_accuracy"].dropna().tolist() if "refusal_accuracy" in rows else []
        glue(f"org_refusal_{key}", span(refusals, "{:.3f}") if refusals else "n/a (no such item)")


def _gain(r: Mapping[str, Any], col: str) -> str:
    """'+g, 95% CI lo to hi' of one gain column of a gate row (differences of fractions)."""
    return f"{r[col]:+.3f}, 95% CI {r[col + '_ci_low']:+.3f} to {r[col + '_ci_high']:+.3f}"


def _stage_clause(r: Mapping[str, Any]) -> str:
    """One gated stage's outcome with the gain over its predecessor (and, for @sft, over the
    best content-blind policy; for @dpo, the preference accuracy's gain over @sft and the content
    probe's over the base, when its record has them, and the preference accuracy against a
    constant style).
    A gate that could not be measured ("not testable": its values are missing) reads its reason."""
    word = "passed" if r["passed"] else "failed"
    key = "gain_over_best_policy" if r["stage"] == "sft" else "preference_gain"
    if r.get(key) is None or pd.isna(r[key]):
        return f"@{r['stage']} {word} ({r.get('reason', 'no values')})"
    if r["stage"] == "sft":
        return (f"@sft {word}, held-out SFT accuracy {r['sft_accuracy']:.3f} against the base's "
                f"{r['base_sft_accuracy']:.3f} ({_gain(r, 'gain_over_base')}) and the best "
                f"content-blind policy's {r['best_policy_accuracy']:.3f} "
                f"({_gain(r, 'gain_over_best_policy')})")  # fmt: skip
    return (f"@dpo {word}, preference accuracy {r['preference_accuracy']:.3f} against @sft's "
            f"{r['sft_preference_accuracy']:.3f} ({_gain(r, 'preference_gain')}) and {r['constant_style_baseline']:.2f} "
            f"for a constant style; content probe {r['content_probe']:.3f} against the base's {r['base_content_probe']:.3f} "
            f"({_gain(r, 'content_gain_over_base')}) and @sft's {r['sft_content_probe']:.3f} ({_gain(r, 'content_gain')})")  # fmt: skip


def stage_detail(gates: pd.DataFrame) -> str:
    """Per model (organisms and aligned real models), each gated stage's outcome with the gain
    over its predecessor and the gain's 95% CI over entity pairs (:func:`_stage_clause`)."""
    gated = gates[gates["gated"].astype(bool)]
    return "; ".join(
        f"`{m}`: " + " and ".join(_stage_clause(r) for r in g.to_dict("records"))
        for m, g in gated.groupby("model", sort=False)
    ) or "no gate was measured"


def gate_outcomes(gates: pd.DataFrame) -> str:
    """Per model, which gated stages passed: "`m` @sft passed, @dpo failed; ..." (the values
    are in :func:`stage_detail`)."""
    gated = gates[gates["gated"].astype(bool)]
    return "; ".join(
        f"`{m}` " + ", ".join(f"@{r['stage']} {'passed' if r['passed'] else 'failed'}"
                               for r in g.to_dict("records"))  # fmt: skip
        for m, g in gated.groupby("model", sort=False)
    ) or "no gate was measured"


def _stages(result: OrganismsResult) -> None:
    """:func:`_stage_spans`, org_gate_detail (:func:`stage_detail`), org_gate_outcomes
    (:func:`gate_outcomes`) and org_margin_detail (reward margins of @dpo against @sft, nats)."""
    S = result.summaries
    _stage_spans(result)
    glue("org_gate_detail", stage_detail(result.tables["gates"]))
    glue("org_gate_outcomes", gate_outcomes(result.tables["gates"]))
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


def _targets(result: OrganismsResult) -> None:
    """org_targets_met ('n of N'), org_missed (each missed target, or "none")."""
    targets = targets_table(result)
    passed = targets["verdict"] == SELF_VERDICTS[0]  # the engine's "check passed"
    glue("org_targets_met", f"{int(passed.sum())} of {len(targets)}")
    glue(
        "org_missed",
        "; ".join(f"{m}: {c}" for m, c, ok in zip(targets["model"], targets["claim_id"], passed, strict=True)
                  if not ok) or "none",
    )
