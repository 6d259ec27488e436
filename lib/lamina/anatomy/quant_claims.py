"""The quantisation control of paper 3's layer-anatomy claims on a model from a quantised GGUF
(:mod:`lamina.states.quant_control`): the weight-delta claims (:data:`QUANT_CONTROL_CLAIMS`)
re-measured on its weights re-quantised; every other claim reads "not run: cost"."""

from __future__ import annotations

import pandas as pd
import torch

from lamina.anatomy.claims import judge_delta
from lamina.anatomy.regularity import delta_table, model_stacks
from lamina.evidence.claims import claims_frame
from lamina.sources.quantize import quantize_model
from lamina.states.quant_control import not_run_control, run_quant_control

__all__ = ["QUANT_CONTROL_CLAIMS", "QUANT_COST", "anatomy_quant_control"]

# the claims the quantisation control re-measures on re-quantised weights: the weight-delta
# correlations (seconds); the others need the sweeps or fine-tunes rerun, beyond the budget
QUANT_CONTROL_CLAIMS = ("p3-anatomy-delta-structure", "p3-anatomy-delta")
QUANT_COST = (
    "cost: it needs the ridge depth fits, the layer sweeps or the recovery fine-tunes "
    "rerun on the re-quantised weights, beyond the book's budget"
)


def anatomy_quant_control(
    model: torch.nn.Module, name: str, claims: pd.DataFrame, notes: list[str],
    n_bootstrap: int, seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """The quantisation control of ``model`` (loaded as ``name``; its claims ``claims``):
    :data:`QUANT_CONTROL_CLAIMS` re-measured on its weights re-quantised (``n_bootstrap``
    resamples, ``seed``); the others read "not run: cost"; notes are appended to ``notes``.
    -> (claims with ``quant_shift``, flip table)."""
    quantization = {name: (getattr(model, "lamina_source", None) or {}).get("quantization")}

    def run_claims(requantised: str) -> pd.DataFrame:
        delta = delta_table(model_stacks(quantize_model(model, requantised.rpartition("+")[2])))
        return claims_frame(judge_delta(requantised, delta, n_bootstrap, seed)).assign(
            model=requantised
        )

    out, flips = run_quant_control([name], claims, quantization, run_claims, notes=notes)
    rest = ~out["claim_id"].isin(QUANT_CONTROL_CLAIMS)
    out.loc[rest, "quant_shift"] = not_run_control(out[rest], quantization, QUANT_COST)[
        "quant_shift"
    ]
    return out, flips
