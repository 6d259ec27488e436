"""The organisms' gate line (#25: the chapter pages' length). The weight-update chapter's verdict
boxes are tested in tests/chapters/test_weight_update_signature_notebook.py."""

from __future__ import annotations

import pandas as pd

from lamina.chapters.organisms.narrative import gate_detail


def test_gate_detail_names_each_targeted_gate_and_its_outcome() -> None:
    gates = pd.DataFrame([
        {"model": "o", "checkpoint": "final", "gate": "preference", "passed": False,
         "reason": "failed: preference accuracy 0.517 < 0.75; content probe 0.539 < 0.7: x"},
        {"model": "o", "checkpoint": "sft", "gate": "sft", "passed": True,
         "reason": "passed: SFT accuracy 0.422 vs majority 0.186: difference +0.235"},
        {"model": "o", "checkpoint": "dpo", "gate": "preference", "passed": False,
         "reason": "failed: content probe 0.593 < 0.7: preference 0.835 [0.808, 0.860]"},
    ])
    text = gate_detail(gates)
    assert text == (
        "o @sft sft gate: passed: SFT accuracy 0.422 vs majority 0.186; "
        "o @dpo preference gate: failed: content probe 0.593 < 0.7"
    )
    assert gate_detail(gates.iloc[:1]) == "no gate was measured"
