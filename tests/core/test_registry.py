"""The chapter registry (issue 24): one record per chapter, and everything that lists chapters
agrees with it. Each check is a function of (notebooks, records, toc) so that its failure can
be shown on a planted mismatch."""

from __future__ import annotations

import re
from pathlib import Path

from lamina.core import registry
from lamina.core.registry import REGISTRY, ChapterRecord

ROOT = Path(__file__).resolve().parents[2]


def registry_mismatches(
    notebooks: set[str], records: tuple[ChapterRecord, ...], toc: str, chapters_dir: Path
) -> list[str]:
    """What does not agree: a notebook without a record, a record without a notebook or a
    chapter module, a duplicate record, a toc chapter page that is not a record, a record
    that is not in the toc."""
    names = [r.name for r in records]
    out = [f"notebook {n!r} has no registry record" for n in sorted(notebooks - set(names))]
    out += [f"record {n!r} has no notebook" for n in names if n not in notebooks]
    out += [f"record {n!r} appears twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for n in names:
        if not ((chapters_dir / f"{n}.py").is_file() or (chapters_dir / n / "__init__.py").is_file()):
            out.append(f"record {n!r} has no chapter module")
    in_toc = re.findall(r"book/executed/(\w+)", toc)
    out += [f"toc page {n!r} has no record" for n in in_toc if n not in names]
    out += [f"record {n!r} is not in the toc" for n in names if n not in in_toc]
    if [n for n in in_toc if n in names] != [n for n in names if n in in_toc]:
        out.append("the toc's chapter order differs from the registry's")
    return out


def _today() -> tuple[set[str], str]:
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.py")}
    return notebooks, (ROOT / "_toc.yml").read_text()


def test_every_notebook_has_a_record_and_every_record_a_notebook():
    notebooks, toc = _today()
    assert registry_mismatches(notebooks, REGISTRY, toc, ROOT / "lib/lamina/chapters") == []


def test_a_notebook_without_a_record_fails():
    notebooks, toc = _today()
    got = registry_mismatches(notebooks | {"new_finding"}, REGISTRY, toc, ROOT / "lib/lamina/chapters")
    assert got == ["notebook 'new_finding' has no registry record"]


def test_a_record_without_a_notebook_fails():
    notebooks, toc = _today()
    extra = (*REGISTRY, ChapterRecord("ghost", 1))
    got = registry_mismatches(notebooks, extra, toc, ROOT / "lib/lamina/chapters")
    assert "record 'ghost' has no notebook" in got
    assert "record 'ghost' has no chapter module" in got
    assert "record 'ghost' is not in the toc" in got


def test_execution_scorecard_and_calibration_derive_from_the_registry():
    from lamina.book.execute import CHAPTERS
    from lamina.book.scorecard import CHAPTER_PAPER
    from lamina.trajectory.calibration import CHAPTERS as CALIBRATED

    assert CHAPTERS == registry.names()
    assert CHAPTER_PAPER == {r.name: r.paper for r in REGISTRY if r.paper is not None}
    assert CALIBRATED == tuple(r.name for r in REGISTRY if r.calibrated)


def test_claim_prefixes_follow_the_claim_id_scheme():
    from lamina.evidence.claims import claim_id

    for r in REGISTRY:
        if r.paper is not None:
            assert claim_id(r.paper, r.stem, "x").startswith(r.claim_prefixes[0])
        assert claim_id(None, r.stem, "x").startswith(r.claim_prefixes[-1])
