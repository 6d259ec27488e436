"""Known-answer acceptance: the four paper-1 chapters on the realistic sources, through the
chapters' own code (issues 11 and 33).

Over seeds 0-4 (bifurcation included: seed 2 was an expected failure before issue 33), no
claim row on ``synthetic-null`` is "reproduced", and the main claim of each chapter on
``synthetic-planted`` is. Then one chapter is rendered on both sources and
its verdict sentence and headline chart title must differ as the data do.
"""

from __future__ import annotations

import json

import pytest

from lamina.chapters import bifurcation, convergence, curvature, three_phase

RUNS = {m.__name__.rsplit(".", 1)[-1]: m for m in (convergence, curvature, bifurcation, three_phase)}


def _run(chapter: str, source: str, seed: int):
    module = RUNS[chapter]
    config = module.Config(model=f"synthetic-{source}", seed=seed, n_bootstrap=200,
                           n_permutations=10_000, sensitivity=False, quant_control=False)
    return module.run(config)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chapter", list(RUNS))
def test_nothing_reproduces_on_the_null(chapter: str, seed: int) -> None:
    null = _run(chapter, "null", seed).claims
    # every row is the source's, but for rows over all sources run (three-phase universal)
    assert null["model"].isin(["synthetic-null", "all sources"]).all()
    reproduced = null.loc[null["verdict"] == "reproduced", "claim_id"].tolist()
    assert reproduced == [], (chapter, seed, reproduced)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chapter", list(RUNS))
def test_the_main_claim_reproduces_on_the_planted_source(chapter: str, seed: int) -> None:
    planted = _run(chapter, "planted", seed).claims
    main = planted[planted["main"].astype(bool)].iloc[0]
    assert main["verdict"] == "reproduced", (chapter, seed, main["claim_id"], main["reason"])


def _outputs(nb: dict) -> str:
    text = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for value in out.get("data", {}).values():
                text.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(text)


@pytest.mark.slow
def test_a_rendered_chapter_says_what_its_source_shows(tmp_path) -> None:
    from lamina.book import execute_chapter

    pages = {}
    for source in ("null", "planted"):
        out = tmp_path / source
        params = {"model": f"synthetic-{source}", "seed": 0, "n_bootstrap": 200,
                  "sensitivity": False, "results_root": str(tmp_path / "results")}
        path = execute_chapter("curvature", out, params, progress=False)
        pages[source] = _outputs(json.loads(path.read_text()))
    assert "synthetic-planted: reproduced" in pages["planted"]
    assert any(f"synthetic-null: {w}" in pages["null"]
               for w in ("absent", "reversed", "smaller than claimed", "not reproduced"))
    assert "synthetic-null: reproduced" not in pages["null"]
    # the glued verdict sentence of the headline claim (no effect: not significant)
    assert "points the other way" in pages["null"] or ">= 0.05" in pages["null"]
    assert "in the claimed range" in pages["planted"]
