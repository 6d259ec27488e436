"""The fitted background (lamina.trajectory.fitted) is what ``python -m lamina.trajectory.fit
smollm2-135m-instruct`` prints: its values read back through the same renderer. (A refit on
SmolLM2's states takes about 8 minutes on one core, too long for the suite; rerun the command
and compare by hand after a change to the fit.)"""

from __future__ import annotations

import pytest

from lamina.trajectory import fitted
from lamina.trajectory.background import Background
from lamina.trajectory.fit import render


@pytest.mark.parametrize("name", ["MEAN", "LAST", "HAZARDS", "EFFECTS", "TUNING"])
def test_the_module_holds_values_the_fit_renders(name):
    """Each value survives the renderer the fit prints with (what the module is made of)."""
    value = getattr(fitted, name)
    scope: dict = {"Background": Background}
    exec(render(name, value), scope)  # the printed source, read back
    assert scope[name] == value


def test_the_module_is_one_printed_block():
    """The module's values are one block of what the fit prints: one ``# fmt: off`` opening
    them, one ``# fmt: on`` closing them (a spliced refit once left six openings)."""
    from pathlib import Path

    lines = Path(fitted.__file__).read_text().splitlines()
    assert lines.count("# fmt: off") == 1 and lines.count("# fmt: on") == 1
    assert lines.index("# fmt: off") < lines.index("# fmt: on")
