"""Paper 2's calibration runs: every calibrated claim judged on its known-answer sources, in the
calibration page's runs format."""

from __future__ import annotations

import pytest

from lamina.evidence.runs import COVERAGE_COLUMN
from lamina.weights.calibration import COVERED, RUN_COLUMNS, calibration_runs
from lamina.weights.claims import CLAIMS
from lamina.weights.measure import PREFIX
from lamina.weights.settings import SignatureSettings
from lamina.weights.sources_mechanism import adam_source, adaptation_source

S = SignatureSettings(n_bootstrap=200, edit_tokens=4, edit_texts=5, edit_scrambled=5)


def test_the_adaptation_source_reads_its_null_and_planted_answers_apart():
    runs = calibration_runs(3, settings=S, sources=("adaptation",), cache=None)
    assert tuple(runs.columns) == (*RUN_COLUMNS, COVERAGE_COLUMN)
    assert runs[COVERAGE_COLUMN].isna().all()  # coverage: only the signature source's Q/K rows
    by = runs.set_index(["source", "seed"])["present"]
    assert not by.loc["null"].any() and by.loc["planted"].all()
    assert adaptation_source("null", 0).groupby("group").size().nunique() == 1


def test_the_optimizer_null_covers_the_first_steps_and_consistent_gradients():
    from lamina.weights.judging import judge_unit
    from lamina.weights.measures_mechanism import optimizer_attenuates

    cid = "p2-signature-optimizer-attenuates"
    present = {}
    for kind, seeds in (("null", range(10)), ("planted", range(2))):
        for seed in seeds:
            adam = adam_source(kind, seed, n=8, d_out=16, d=64)
            m = {cid: optimizer_attenuates(adam, "sft", S)}
            row = judge_unit("known", m, {"sft": (True, "")}, only=[cid]).iloc[0]
            present[(kind, seed, int(adam["step"].iloc[0]))] = bool(row["present"])
    assert {k[2] for k in present if k[0] == "null"} == {1, 3, 8, 30, 120}
    assert not any(v for k, v in present.items() if k[0] == "null")
    assert all(v for k, v in present.items() if k[0] == "planted")


@pytest.mark.slow
def test_every_calibrated_claim_has_runs_from_every_source():
    from lamina.evidence.calibration import calibration_rates, calibration_table

    runs = calibration_runs(1, settings=S, cache=None)
    calibrated = {c.id for c in CLAIMS if c.calibrated}
    assert set(runs["claim_id"]) == calibrated
    assert set(runs["source"]) == {"null", "planted", "half", "faded"}
    faded = runs[runs["source"] == "faded"]
    kept = {c.id for c in CLAIMS if c.conditional_null == "faded"}
    assert kept and kept <= set(faded["claim_id"])  # the kept rows' conditional null
    table = calibration_table(CLAIMS, calibration_rates(runs, CLAIMS))  # the page's table
    assert list(table["claim_id"]) == [c.id for c in CLAIMS]
    # coverage: read on the planted signature rows of COVERED, NaN on every other row
    covered = runs[COVERAGE_COLUMN].notna()
    assert set(runs.loc[covered, "claim_id"]) == {PREFIX + name for name in COVERED}
    assert set(runs.loc[covered, "source"]) == {"planted"}
    assert set(runs.loc[covered, COVERAGE_COLUMN]) <= {0.0, 1.0}
    assert table.set_index("claim_id").loc[PREFIX + "align-qk-sft", "n_coverage"] == 1


def test_runs_are_cached_and_a_damaged_entry_is_recomputed_with_a_warning(tmp_path):
    first = calibration_runs(1, settings=S, sources=("adaptation",), cache=tmp_path)
    entry = next(tmp_path.rglob("adaptation-seed-0.json"))
    assert calibration_runs(1, settings=S, sources=("adaptation",), cache=tmp_path).equals(first)
    entry.write_text(entry.read_text().replace('"reproduced"', '"absent"', 1))
    with pytest.warns(UserWarning, match="damaged calibration cache entry"):
        again = calibration_runs(1, settings=S, sources=("adaptation",), cache=tmp_path)
    assert again.equals(first)


def test_the_cache_key_covers_the_modules_the_runs_import_and_not_the_pages_rates(monkeypatch):
    """Paper 2's 2 h of runs are keyed on the lamina modules they import, transitively: an
    edit to the page's rates (lamina.evidence.calibration, never imported by the runs) keeps
    them; an edit to decide, or to any module of the closure, does not. (Before: every file
    of lamina/weights and lamina/evidence, so an edit to the rates recomputed them all.)"""
    from pathlib import Path

    import lamina.weights.calibration as wcal
    from lamina.core.imports import import_closure

    closure = import_closure(Path(wcal.__file__))
    assert closure is not None
    assert {"lamina.evidence.decide", "lamina.evidence.declare", "lamina.weights.qk_null"} <= set(closure)
    assert "lamina.evidence.calibration" not in closure
    s = SignatureSettings()
    key = wcal.cache_key(s)
    one = {m: p for m, p in closure.items() if m != "lamina.evidence.decide"}
    monkeypatch.setattr(wcal, "import_closure", lambda source: one)
    assert wcal.cache_key(s) != key  # a module of the closure counts
    monkeypatch.setattr(wcal, "import_closure", lambda source: closure)
    assert wcal.cache_key(s) == key


def test_the_qk_truth_is_the_drawn_statistics_population_value():
    """qk_truth against a Monte Carlo of the source's own draws (its _rsf, its clamp, the
    statistic's k/d floor): it would fail on a truth of PLANTED_RATIO itself, which ignores the
    floor, and on a floor or clamp taken at the wrong place."""
    import math

    import torch

    from lamina.weights.sources import PLANTED_RATIO, SIZES, W_ENRICHMENT, _clamped, _rsf, qk_truth

    gen = torch.Generator().manual_seed(0)
    size = SIZES[1]
    floor, rsf_w = size.k / size.d, W_ENRICHMENT * size.k / size.d
    for kind, ratio in (("planted", PLANTED_RATIO), ("null", 1.0)):
        logs = [math.log(float(_clamped(_rsf(gen, ratio * rsf_w))))
                - math.log(max(float(_clamped(_rsf(gen, rsf_w))), floor)) for _ in range(160_000)]
        mc, se = sum(logs) / len(logs), float(torch.tensor(logs).std()) / len(logs) ** 0.5
        assert abs(math.log(qk_truth(kind, size)) - mc) < 4 * se
    assert qk_truth("null", size) < 1 < qk_truth("half", size) < qk_truth("planted", size) < PLANTED_RATIO
    assert abs(math.log(qk_truth("planted", size) / PLANTED_RATIO)) > 4 * se  # the floor is seen
    with pytest.raises(ValueError, match="kind"):
        qk_truth("plant", size)
