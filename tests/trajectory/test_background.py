"""The background fit (lamina.trajectory.background): keys, shares and length terms recovered
from states whose structure is known."""

import numpy as np
import pandas as pd
import pytest

from lamina.trajectory.background import (
    fit_background,
    length_weight,
    prompt_keys,
    same_key,
    sampled_layers,
)
from lamina.trajectory.fitted import HAZARDS, LAST, MEAN
from lamina.trajectory.realistic import Levers, compose, draw, source_tokens
from lamina.trajectory.sizes import chapter_prompts


def test_keys_share_frames_items_bases_contexts_and_last_words():
    t = pd.DataFrame({
        "prompt": ["Next is ant", "Next is fox", "a cat", "the cat", "We sat at the bank",
                   "We sat at the wall"],
        "family": ["semantic_neutral", "semantic_neutral", "lexical", "lexical", None, None],
        "category": ["animals", "animals", None, None, None, None],
        "item": ["ant", "fox", None, None, None, None],
        "frame": ["list", "list", None, None, None, None],
        "base": [None, None, "cat", "cat", None, None],
        "role": [None, None, None, None, "ambiguous", "control"],
        "pair_id": [None, None, None, None, "bank-1", "bank-1"],
        "sense": [None, None, None, None, "ctx1", "ctx1"],
    })
    k = prompt_keys(t, "last")
    assert same_key(k["frame"])[0, 1] and not same_key(k["item"])[0, 1]
    assert same_key(k["base"])[2, 3]
    assert same_key(k["context"])[4, 5] and not same_key(k["last"])[4, 5]
    assert (prompt_keys(t, "mean")["last"] == "").all()  # the last word matters under "last"
    assert np.allclose(length_weight([1, 2, 4], "mean"), [1, 0.5, 0.25])
    assert np.allclose(length_weight([1, 2, 4], "last"), [1, 0, 0])
    assert list(sampled_layers(30)) == [0, 2, 5, 8, 10, 12, 15, 18, 20, 22, 25, 28, 30]


def test_the_fit_recovers_what_the_source_is_built_from():
    """Fitting the generator's own states gives back its persistence, the key shares it was
    built with and the length dependence of its own part, within sampling error. The frame
    share is read high: with a few frames, removing the mean over prompts leaves prompts of
    different frames anti-correlated, which widens the gap the share is read from; that is
    why lamina.trajectory.fit tunes it to the frame hazard instead of keeping the estimate."""
    t = pd.concat([chapter_prompts("convergence"), chapter_prompts("curvature")], ignore_index=True)
    x = compose(t, draw(t, 3, MEAN), MEAN, Levers())
    fit = fit_background(x, t, source_tokens(t, MEAN), "mean", n_layers=MEAN.n_layers)
    assert np.allclose(fit.rho[2:], MEAN.rho[2:], atol=0.15)
    assert np.allclose(fit.noise_slope, MEAN.noise_slope, atol=0.2)
    for kind in ("template", "item", "base"):
        assert np.allclose(fit.share(kind)[1:], MEAN.share(kind)[1:], atol=0.12), kind
    assert np.all(fit.share("frame") >= MEAN.share("frame") - 0.05)
    assert not fit.rotary


def test_a_rotary_source_is_recognised_and_keeps_delta0_zero():
    t = chapter_prompts("bifurcation")
    x = compose(t, draw(t, 0, LAST), LAST, Levers())
    assert LAST.rotary
    fit = fit_background(x, t, source_tokens(t, LAST), "last", n_layers=LAST.n_layers)
    assert fit.rotary and fit.share("last")[0] == 1.0


def test_the_fitted_model_is_rotary_and_its_hazards_were_measured():
    assert LAST.rotary and not MEAN.rotary
    n_pairs = chapter_prompts("bifurcation")["pair_id"].nunique()  # every last-word pair
    assert HAZARDS["zero_base_pairs"] == n_pairs and HAZARDS["baseline_layer"] == 1
    assert np.isfinite(HAZARDS["pair_ratio_correlation"])


def test_the_positional_fit_has_every_pair_separated_at_layer_0():
    """organism-gpt2 has learned positions: a pair whose two sentences have equal token length
    has delta(0) = 0, and one such pair makes the paper's ratio undefined for the chapter
    (17 of the 120 pairs before their sentences got openers). The fit must see none."""
    from lamina.trajectory import fitted_positional

    assert fitted_positional.HAZARDS["zero_base_pairs"] == 0
    assert fitted_positional.HAZARDS["baseline_layer"] == 0


def test_a_bad_fit_input_is_refused():
    t = chapter_prompts("curvature")
    with pytest.raises(ValueError, match="n >= 8"):
        fit_background(np.zeros((3, 4, 5)), t, np.ones(len(t)), "mean")
    with pytest.raises(ValueError, match="tokens"):
        fit_background(np.zeros((len(t), 4, 5)), t, np.zeros(len(t)), "mean")
