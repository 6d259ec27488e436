"""The scorecard counts claims of the papers only: lamina's self-checks are listed apart."""

from lamina.book.scorecard import _abstract_md, claims_table


def _record(rows):
    return {"chapter": "reanalysis", "model": "peer-gpt2", "summary": {"claims": rows}}


def test_self_checks_are_not_counted_as_reproductions():
    rows = [
        {"claim_id": "self-reanalysis-released-curvature", "kind": "self-check",
         "verdict": "check passed", "claim": "lamina matches", "model": "peer-gpt2"},
        {"claim_id": "p1-reanalysis-gap", "kind": "paper", "verdict": "not reproduced",
         "claim": "gap", "model": "peer-gpt2"},
        # an old results file: a self-check id without a kind, judged "reproduced"
        {"claim_id": "self-reanalysis-released-ci", "verdict": "reproduced", "claim": "ci",
         "model": "peer-gpt2"},
    ]
    table = claims_table([_record(rows)])
    kinds = dict(zip(table["claim_id"], table["kind"], strict=False))
    assert kinds["self-reanalysis-released-ci"] == "self-check"
    text = _abstract_md(table)
    # the counts sentence opens the folded detailed matrix
    first = next(line for line in text.splitlines() if "claims of the papers" in line)
    assert "✅" not in text and first.startswith("<p>1 claims of the papers, tested on 1 model(s)")
    assert "Not counted: 2 self-checks" in first
