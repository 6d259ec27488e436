"""Paper 3's layer-anatomy claims judged by the one engine on known tables: the rows that can
fail (each of these read otherwise at 2a683dc; the report names the old verdicts)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.anatomy.claims import CLAIMS, judge_anatomy
from lamina.anatomy.measurements import AnatomyTables, MeasureOptions, measure_anatomy
from lamina.anatomy.predictability import depth_fit_terms, scaled_stacks
from lamina.anatomy.regularity import SCALED, permuted_r2

OPTS = MeasureOptions(n_bootstrap=400, n_permutations=200)


def _rows(
    surgery: str, deltas: list[float], n_units: int, rng: np.random.Generator, sd: float = 0.01
) -> list[dict]:
    """Sweep rows of one surgery: per-unit NLLs (one window per unit) whose mean gives each
    delta_pct, with per-window noise ``sd`` (nats per token)."""
    base = 3.0 + 0.2 * rng.standard_normal(n_units)
    rows = []
    for layer, d in enumerate(deltas):
        per = base + np.log1p(d / 100) + sd * rng.standard_normal(n_units)
        rows.append(
            {
                "layer": layer,
                "surgery": surgery,
                "nll_per_seq": per,
                "base_nll_per_seq": base,
                "delta_pct": 100 * float(np.expm1(per.mean() - base.mean())),
            }
        )
    return rows


def _sweep(rows: list[dict], n_units: int) -> pd.DataFrame:
    from lamina.anatomy.heldout import regroup_sweep

    return regroup_sweep(pd.DataFrame(rows), np.arange(n_units), 128, 400, 0)


def _weights(kind: str, rng: np.random.Generator, n_layers: int = 12) -> dict:
    """Terms (raw and scaled entries) and the scaled entries' null of 3 matrix types whose
    layers follow depth (``"depth"``, R2 near 1) or are independent (``"noise"``)."""
    z = np.linspace(0, 1, n_layers)[:, None]
    stacks = {}
    for role in ("q", "mlp_gate", "mlp_out"):
        pattern = rng.standard_normal((3, 200))  # a pattern that changes with depth
        signal = pattern[0] + z * pattern[1] + z**2 * pattern[2]
        noise = rng.standard_normal((n_layers, 200))
        stacks[role] = signal + 0.05 * noise if kind == "depth" else noise
    scaled = scaled_stacks(stacks)
    terms = {"raw entries": depth_fit_terms(stacks), SCALED: depth_fit_terms(scaled)}
    nulls = {SCALED: permuted_r2(list(scaled.values()), 0.01, 2, 200, 0)}
    return {"terms": terms, "r2_null": nulls}


def _judge(t: AnatomyTables) -> pd.DataFrame:
    measured, gates = measure_anatomy(t, OPTS)
    return pd.DataFrame([c.row() for c in judge_anatomy("m", measured, gates)]).set_index(
        "claim_id"
    )


def test_catastrophic_predicted_weights_after_a_poor_depth_fit_are_not_the_papers_claim():
    rng = np.random.default_rng(0)
    rows = _rows("skip", [50.0] * 12, 8, rng) + _rows("predicted", [900.0] * 12, 8, rng)
    poor = _weights("noise", rng)
    t = AnatomyTables(_sweep(rows, 8), np.arange(8), 12, poor["terms"], poor["r2_null"])
    claims = _judge(t)
    assert claims.loc["p3-anatomy-r2", "verdict"] != "reproduced"
    assert claims.loc["p3-anatomy-predicted", "verdict"] == "not testable"
    good = _weights("depth", rng)
    t = AnatomyTables(_sweep(rows, 8), np.arange(8), 12, good["terms"], good["r2_null"])
    claims = _judge(t)
    assert claims.loc["p3-anatomy-r2", "verdict"] == "reproduced"
    assert claims.loc["p3-anatomy-predicted", "verdict"] == "reproduced"


def test_accumulation_has_a_ci_and_a_test_over_documents_of_every_swept_layer():
    rng = np.random.default_rng(1)
    n = 12
    rows = _rows("skip", [50.0] * 6, n, rng) + _rows("predicted", [20.0, 30.0, 10.0, 40.0], n, rng)
    pr = pd.DataFrame(rows).query("surgery == 'predicted'")
    base = pr["base_nll_per_seq"].iloc[0]
    single = sum(np.asarray(p) - base for p in pr["nll_per_seq"])
    joint = base + 2.0 * single + 0.01 * rng.standard_normal(n)  # twice the summed increase
    t = AnatomyTables(_sweep(rows, n), np.arange(n), 6, joint_nll=joint)
    row = _judge(t).loc["p3-anatomy-accumulation"]
    assert row["ci_low"] < row["measured"] < row["ci_high"] and row["ci_low"] > 1
    assert row["p"] < 0.05 and row["verdict"] == "reproduced"
    assert "layers 0, 1, 2, 3 replaced jointly" in row["reason"]
    additive = base + single + 0.01 * rng.standard_normal(n)
    row = _judge(AnatomyTables(_sweep(rows, n), np.arange(n), 6, joint_nll=additive)).loc[
        "p3-anatomy-accumulation"
    ]
    assert row["verdict"] in ("absent", "reversed")


def test_no_anti_layer_is_never_a_partial_reproduction():
    """One layer lowers NLL on 15 of 16 units (a small Wilcoxon q) but raises it on the mean
    (one unit much higher): no anti-layer. At 2a683dc this row read "partially"."""
    rng = np.random.default_rng(2)
    n = 16
    rows = _rows("skip", [200.0, 50.0, 20.0, 10.0], n, rng, sd=0.002)
    rows[3]["nll_per_seq"] = rows[3]["base_nll_per_seq"] - 0.002  # every unit a little lower...
    rows[3]["nll_per_seq"][0] += 0.3  # ...but one unit much higher
    claims = _judge(AnatomyTables(_sweep(rows, n), np.arange(n), 4))
    anti = claims.loc["p3-anatomy-anti"]
    assert anti["measured"] == 0 and anti["verdict"] == "fewer than claimed"
    assert not anti["present"] and anti["kind"] == "count"


def test_every_declared_claim_has_a_calibration_status_and_one_sidedness():
    for spec in CLAIMS:
        assert bool(spec.calibrated) != bool(spec.not_calibrated)
        assert spec.id.startswith("p3-anatomy-")


@pytest.mark.parametrize("n_layers", [30, 18, 12])
def test_a_planted_core_at_the_mapped_l8_11_reads_reproduced(n_layers):
    from lamina.anatomy.paper import PAPER_CORE, paper_layers

    rng = np.random.default_rng(3)
    deltas = list(5 + 10 * rng.random(n_layers))
    for layer in paper_layers(list(PAPER_CORE), n_layers):
        deltas[layer] = 60_000.0
    claims = _judge(
        AnatomyTables(_sweep(_rows("skip", deltas, 10, rng), 10), np.arange(10), n_layers)
    )
    assert claims.loc["p3-anatomy-core", "verdict"] == "reproduced"
    assert claims.loc["p3-anatomy-core-max", "verdict"] == "reproduced"


def test_a_large_layer_in_a_core_that_is_not_the_most_important_is_no_core_size():
    """SmolLM2's +74,279% layer at core layer 9 while its other large layers lie outside the
    core: the core is not the most important, so its size is not judged (at 2a683dc, before
    issue 22, the size check alone read "reproduced")."""
    rng = np.random.default_rng(5)
    deltas = [20.0] * 30
    for layer, d in {9: 74_279.0, 1: 2_048.0, 29: 1_695.5, 20: 390.0}.items():
        deltas[layer] = d
    claims = _judge(AnatomyTables(_sweep(_rows("skip", deltas, 10, rng), 10), np.arange(10), 30))
    assert claims.loc["p3-anatomy-core", "verdict"] == "absent"
    assert claims.loc["p3-anatomy-core-max", "verdict"] == "not testable"


def test_only_scaling_preserves_is_not_read_where_scaling_does_not_preserve():
    """No strategy preserves quality, scaling included (every worst layer at +30%): the count
    of other preserving strategies is 0, but "only scaling preserves" is not reproduced by
    that. Without the declaration's precondition it read "count as claimed", as on 80 of 80
    known-answer null seeds (scaling's worst layer at +5%, its threshold)."""
    rng = np.random.default_rng(3)
    n = 16
    rows = [
        r
        for s in ("scale", "noise", "interpolate", "reinit")
        for r in _rows(s, [30.0, 10.0, 5.0, 20.0], n, rng)
    ]
    claims = _judge(AnatomyTables(_sweep(rows, n), np.arange(n), 4))
    assert claims.loc["p3-anatomy-scaling", "verdict"] != "reproduced"
    only = claims.loc["p3-anatomy-scaling-only"]
    assert only["measured"] == 0 and only["verdict"] == "not testable"
    assert "p3-anatomy-scaling" in only["reason"]
    rows = [r for s in ("scale",) for r in _rows(s, [0.5, 0.2, 0.1, 0.3], n, rng, sd=0.001)]
    rows += [r for s in ("noise", "reinit") for r in _rows(s, [30.0, 10.0, 5.0, 20.0], n, rng)]
    claims = _judge(AnatomyTables(_sweep(rows, n), np.arange(n), 4))
    assert claims.loc["p3-anatomy-scaling", "verdict"] == "reproduced"
    assert claims.loc["p3-anatomy-scaling-only", "verdict"] == "count as claimed"


def test_only_scaling_needs_every_other_strategy_shown_to_damage():
    """A second strategy whose bounds straddle +5% (worst layer at +5%, noisy units) is not
    shown to preserve, nor to damage: it counts against "only scaling preserves". At e2b72a5
    the count held only strategies shown to preserve, so this read "count as claimed", as it
    did on 15 of 115 seeds of the calibration source where noise preserves at +1%."""
    rng = np.random.default_rng(4)
    n = 16
    rows = [r for r in _rows("scale", [0.5, 0.2, 0.1, 0.3], n, rng, sd=0.001)]
    rows += _rows("reinit", [30.0, 10.0, 5.0, 20.0], n, rng)
    rows += _rows("noise", [5.0, 1.0, 2.0, 3.0], n, rng, sd=0.05)
    claims = _judge(AnatomyTables(_sweep(rows, n), np.arange(n), 4))
    assert claims.loc["p3-anatomy-scaling", "verdict"] == "reproduced"
    only = claims.loc["p3-anatomy-scaling-only"]
    assert only["measured"] == 1 and only["verdict"] == "more than claimed"
    assert "nor to damage: noise" in only["reason"]
