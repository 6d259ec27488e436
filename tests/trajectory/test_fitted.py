"""The fitted background (lamina.trajectory.fitted) is what ``python -m lamina.trajectory.fit
smollm2-135m-instruct`` prints: its values read back through the same renderer. (A refit on
SmolLM2's states takes about 8 minutes on one core, too long for the suite; rerun the command
and compare by hand after a change to the fit.)"""

from __future__ import annotations

import pytest

from lamina.trajectory import fitted, fitted_positional
from lamina.trajectory.background import Background
from lamina.trajectory.fit import render

MODULES = {"smollm2": fitted, "organism-gpt2": fitted_positional}


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("name", ["MEAN", "LAST", "HAZARDS", "EFFECTS", "TUNING"])
def test_the_module_holds_values_the_fit_renders(module, name):
    """Each value survives the renderer the fit prints with (what the module is made of)."""
    value = getattr(MODULES[module], name)
    scope: dict = {"Background": Background}
    exec(render(name, value), scope)  # the printed source, read back
    assert scope[name] == value


@pytest.mark.parametrize("module", MODULES)
def test_the_module_is_one_printed_block(module):
    """The module's values are one block of what the fit prints: one ``# fmt: off`` opening
    them, one ``# fmt: on`` closing them (a spliced refit once left six openings)."""
    from pathlib import Path

    lines = Path(MODULES[module].__file__).read_text().splitlines()
    assert lines.count("# fmt: off") == 1 and lines.count("# fmt: on") == 1
    assert lines.index("# fmt: off") < lines.index("# fmt: on")


def test_a_layer_0_tune_moves_a_share_to_the_last_word_there_alone():
    """The positional background's layer-0 tune (fit.TUNED): the share 1 - k of the layer-0
    context moves to the last word, no other layer changes, and a rotary background (whose
    layer 0 is the last word alone) is left as it is."""
    import dataclasses

    from lamina.trajectory.fit import _scaled

    bg = fitted_positional.LAST
    shares = dict(bg.shares)
    ctx, last = shares["context"], shares["last"]
    base = dataclasses.replace(bg, shares=tuple({**shares, "context": (0.6, *ctx[1:]),
                                                 "last": (0.3, *last[1:])}.items()))  # fmt: skip
    moved = dict(_scaled(base, "context", 0.25, "0").shares)
    assert moved["context"][0] == pytest.approx(0.15) and moved["last"][0] == pytest.approx(0.75)
    assert moved["context"][1:] == ctx[1:] and moved["last"][1:] == last[1:]
    assert _scaled(fitted.LAST, "context", 0.25, "0") == fitted.LAST  # rotary: untouched


def test_the_positional_null_separates_homograph_pairs_at_layer_0_as_the_organism_does():
    """Untuned (e2b72a5's attempt), the null's pairs separated by 0.6-0.7 chord at layer 0
    against organism-gpt2's 0.289, which capped its ratio below the claimed 4.9x; tuned, the
    null keeps that hazard at the organism's size."""
    from lamina.trajectory.fit import null_hazards

    got = null_hazards({"last": fitted_positional.LAST, "mean": fitted_positional.MEAN},
                       range(5))  # fmt: skip
    assert got["zero_base_pairs"] == 0
    assert got["base_separation"] == pytest.approx(fitted_positional.HAZARDS["base_separation"],
                                                   abs=0.05)  # fmt: skip
