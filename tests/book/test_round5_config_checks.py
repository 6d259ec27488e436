"""Issue 53, "what to build" 2: every chapter's parameters are checked before any kernel
starts, by the ranges declared beside its config (``lamina.core.bounds``). Each case below
started a kernel on 5a06132 (and failed in it, or ran with the value); the trajectory
chapters' were checked already (tests/book/test_round5_usage.py)."""

from __future__ import annotations

import re

import pytest

import lamina.__main__ as lamina_cli


@pytest.mark.parametrize(
    ("chapter", "name", "value", "says"),
    [
        ("weight_update_signature", "n_tokens", "-5", "n_tokens must be a whole number >= 1; got -5"),
        ("weight_update_signature", "objective_steps", "0", "objective_steps must be a whole number >= 1; got 0"),
        ("weight_update_signature", "edit_scale", "-1.0", "edit_scale must be a number > 0; got -1.0"),
        ("weight_update_signature", "real_lr", "0", "real_lr must be a number > 0; got 0.0"),
        ("weight_update_signature", "real_layers", "-5", "real_layers must be a whole number >= 0; got -5"),
        ("weight_update_signature", "k_sweep", "[4, -5]", "k_sweep must be a list of whole numbers >= 1"),
        ("weight_update_signature", "model_budgets", "'bogus'", "model_budgets must be None or {model name:"),
        ("weight_update_signature", "model_budgets", "{'m': {'real_steps': -1}}",
         "model_budgets['m']['real_steps'] must be a whole number >= 1; got -1"),
        ("weight_update_signature", "model_budgets", "{'m': {'steps': 1}}",
         "model_budgets['m'] caps 'steps', which is not a real_* budget field"),
        ("layer_anatomy", "recovery_noise", "-1.0", "recovery_noise must be a number >= 0; got -1.0"),
        ("layer_anatomy", "alpha", "-1.0", "alpha must be a number >= 0; got -1.0"),
        ("layer_anatomy", "robustness_tokens", "-5", "robustness_tokens must be a whole number >= 1 or None"),
        ("layer_anatomy", "recovery_budget", "'bogus'", "recovery_budget must be a whole number >= 1 or None"),
        ("layer_anatomy", "k_max", "-5", "k_max must be a whole number >= 1 or None; got -5"),
        ("layer_anatomy", "n_tokens", "'bogus'", "n_tokens must be a whole number >= 2 or None"),
        ("layer_anatomy", "recovery_layers", "'bogus'", "recovery_layers must be a list of layer indices"),
        ("layer_anatomy", "importance_surgeries", "-5", "importance_surgeries must be a surgery name or a list"),
        ("growth_training", "d_model", "0", "d_model must be a whole number >= 1; got 0"),
        ("growth_training", "n_layers", "-5", "n_layers must be a whole number >= 1; got -5"),
        ("growth_training", "seeds", "[0, -5]", "seeds must be a list of whole numbers in [0, 4294967295]"),
        ("growth_training", "real_models", "-5", "real_models must be None or a list of model names"),
        ("organisms", "n_eval", "-5", "n_eval must be a whole number >= 1 or None; got -5"),
        ("organisms", "n_samples", "0", "n_samples must be a whole number >= 1; got 0"),
        ("organisms", "ref_docs", "-5", "ref_docs must be a whole number >= 1; got -5"),
        ("organisms", "ref_passage_chars", "0", "ref_passage_chars must be a whole number >= 1; got 0"),
    ],
)  # fmt: skip
def test_a_value_out_of_its_declared_range_is_refused_before_a_kernel(
    no_kernel, capsys, chapter, name, value, says
):
    with pytest.raises(SystemExit) as info:
        lamina_cli.main(["run", chapter, "-p", name, value, "--out", str(no_kernel / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert says in err and f"chapter {chapter!r}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()[-1]) < 400  # one line after the usage


@pytest.mark.parametrize(
    ("module", "name", "kwargs", "says"),
    [
        ("lamina.chapters.curvature", "Config", {"seed": -1}, "seed must be a whole number in"),
        ("lamina.chapters.curvature", "Config", {"n_bootstrap": "many"}, "n_bootstrap must be a whole number >= 10"),
        ("lamina.chapters.trajectory_tour", "Config", {"seed": 2**32}, "seed must be a whole number in"),
        ("lamina.weights.settings", "SignatureSettings", {"early_fraction": 1.5}, "early_fraction must be a number in [0, 1]"),
        ("lamina.chapters.layer_anatomy", "AnatomyConfig", {"threads": 0}, "threads must be a whole number >= 1 or None"),
        ("lamina.chapters.growth_training", "GrowthConfig", {"lr": float("nan")}, "lr must be a number > 0; got nan"),
        ("lamina.chapters.organisms", "OrganismsConfig", {"temperature": 0}, "temperature must be a number > 0"),
    ],
)  # fmt: skip
def test_a_config_built_in_python_uses_the_same_checks(module, name, kwargs, says):
    """The notebook and Python callers build the same config: the same refusal."""
    import importlib

    config = getattr(importlib.import_module(module), name)
    with pytest.raises(ValueError, match=f"^{re.escape(says)}"):
        config(**kwargs)


def test_a_bound_refuses_bools_strings_and_non_finite_numbers():
    from lamina.core.bounds import COUNT, FRACTION, POSITIVE, Bound, check_bounds

    class Holder:
        n, x, f, rate, items = 3, None, 0.5, 1e-3, (1, 2)

    bounds = {"n": COUNT, "x": Bound(1, optional=True), "f": FRACTION, "rate": POSITIVE,
              "items": Bound(1, integer=True, each=True)}  # fmt: skip
    check_bounds(Holder(), bounds)
    for name, bad in [("n", True), ("n", 2.0), ("n", "3"), ("f", 1.01), ("f", float("nan")),
                      ("rate", 0.0), ("rate", float("inf")), ("items", (1, 0)), ("items", 1)]:  # fmt: skip
        holder = Holder()
        setattr(holder, name, bad)
        with pytest.raises(ValueError, match=f"^{name} must be .*; got {re.escape(repr(bad))}$"):
            check_bounds(holder, bounds)
