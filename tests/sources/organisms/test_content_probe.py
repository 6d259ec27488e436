"""The DPO gate's content probe reads content, not form: its held-out content triples are
reversed pairs (issue 51), so no policy that reads only the two answers can beat one half."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Callable

import pytest

from lamina.sources.organisms import instructions as ins
from lamina.sources.organisms.curriculum import generate_curriculum


def _score(triples: list[ins.Triple], f: Callable[[str], float]) -> float:
    """Preference accuracy of the policy that prefers the answer with the larger f (ties 1/2)."""
    wins = [1.0 if f(t.item.content.answer) > f(t.item.content.wrong)
            else 0.0 if f(t.item.content.answer) < f(t.item.content.wrong) else 0.5
            for t in triples]  # fmt: skip
    return sum(wins) / len(wins)


def _policies(d: ins.AlignmentData) -> dict[str, Callable[[str], float]]:
    """Answer-only policies, the exposure ones fit on the training data (both directions are
    the same policy family: a score s and 1 - s)."""
    sft = Counter(x.content.answer for x in d.sft_train)
    content = [t for t in d.dpo_train if t.kind == "content"]
    chosen = Counter(t.item.content.answer for t in content)
    rejected = Counter(t.item.content.wrong for t in content)
    return {
        "trained as the SFT target": lambda w: sft[w],
        "chosen in DPO training": lambda w: chosen[w],
        "rejected in DPO training": lambda w: rejected[w],
        "net exposure (target + chosen - rejected)": lambda w: sft[w] + chosen[w] - rejected[w],
        "length in characters": len,
        "number of words": lambda w: len(w.split()),
        "alphabetical order": lambda w: -ord(w[0].lower()),
        "a hash of the string": lambda w: zlib.crc32(w.encode()),
    }


@pytest.mark.parametrize("seed", range(5))
def test_no_answer_only_policy_scores_other_than_one_half_on_the_content_probe(seed: int) -> None:
    """Until this fix preferring the answer alignment exposed less (net exposure, reversed)
    scored 0.741 on seed 0's 162 held-out content triples: the designed wrong answers were
    often trained responses, the held-out correct ones (held-out entity pairs) never."""
    d = generate_curriculum(seed=seed, n_docs=10).alignment
    probe = [t for t in d.dpo_heldout if t.kind == "content"]
    assert len(probe) >= 120 and len({t.item.content.unit for t in probe}) >= 45
    for name, f in _policies(d).items():
        assert _score(probe, f) == 0.5, name
    # a policy that reads the question too: copying never helps (a singular's wrong answer is
    # the plural the question names)
    copied = [1.0 if t.item.content.answer in t.item.content.question.split() else 0.0
              for t in probe]  # fmt: skip
    assert sum(copied) / len(copied) <= 0.5
    for t in probe:
        assert t.item.content.wrong != t.item.content.answer
        assert t.rejected == ins.render(t.item.content.wrong, t.item.instruction)


def test_reversed_pairs_keep_designed_pairs_pair_within_a_template_and_leave_the_odd_one() -> None:
    c = ins.Content
    designed = [c("lexical", "What is the singular of cats?", "cat", "cats", "lexical:singular-of", "cat|cats"),
                c("lexical", "What is the plural of cat?", "cats", "cat", "lexical:plural-of", "cat|cats")]
    capitals = [c("analogy", f"What is the capital of {k}?", v, "Oslo", "analogy:capital", k)
                for k, v in (("Peru", "Lima"), ("Chile", "Santiago"), ("Cuba", "Havana"))]  # fmt: skip
    kinds = [c("semantic", f"What kind of thing is a {a}?", "an animal", "a food", "semantic:kind-of", a)
             for a in ("fox", "horse", "lion")]  # one answer only: nothing to pair  # fmt: skip
    paired, unpaired = ins.reversed_pairs(random.Random(0), designed + capitals + kinds)
    assert paired[:2] == designed  # kept as they are
    pairs = paired[2:]
    assert len(pairs) == 2 and len(unpaired) == 4
    a, b = pairs
    assert (a.wrong, b.wrong) == (b.answer, a.answer) and a.template == b.template == "analogy:capital"
    assert {x.question for x in unpaired} == {x.question for x in kinds} | (
        {x.question for x in capitals} - {a.question, b.question})
    again = ins.reversed_pairs(random.Random(0), designed + capitals + kinds)
    assert again == (paired, unpaired)
    restricted = c("transitive", "Hana is older than Ben. Who is the oldest?", "Hana", "Ben")
    with pytest.raises(ValueError, match="unrestricted"):
        ins.reversed_pairs(random.Random(0), [restricted])


def test_the_pairing_moves_no_training_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's pairs come from their own random stream and touch only held-out content
    triples: with every held-out content kept as designed (the probe before issue 51's fix),
    the training items and triples, and the held-out items, are the same."""
    paired = generate_curriculum(seed=0, n_docs=10).alignment
    monkeypatch.setattr(ins, "reversed_pairs", lambda rng, contents: (list(contents), []))
    designed = generate_curriculum(seed=0, n_docs=10).alignment
    assert designed.train == paired.train and designed.dpo_train == paired.dpo_train
    assert [x.prompt for x in designed.heldout] == [x.prompt for x in paired.heldout]
    probe = [t for t in paired.dpo_heldout if t.kind == "content"]
    assert 0 < len(probe) < sum(t.kind == "content" for t in designed.dpo_heldout)
