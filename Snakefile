# The book's build as a Snakemake workflow (issue 52): one rule per stage, each calling the
# lamina command that `make book` runs for it (papermill stays the notebook executor).
#
#   make book                                    # this machine: its cores and memory
#   snakemake --profile workflow/profiles/slurm  # a Slurm cluster (shared LAMINA_DATA)
#   snakemake -n --profile workflow/profiles/default   # what would run, and why
#
# Stages: organisms (one rule per organism and training seed), aligned (one per real model),
# chapter (each chapter in the book's own build), run (a chapter x model run outside the book,
# from config["matrix"]), calibration_paper (one per paper), calibration_page, methods, pages,
# html. A chapter or a paper's calibration reads its lamina reuse key as a file
# (lamina.book.keyfile), rewritten only when the key changes, so the rule reruns exactly then.
# Organisms and aligned builds are named by their config hash, lamina's key for them.
# Every rule writes a benchmark record (wall time, peak memory) under config["records"];
# workflow/scripts/stage_table.py turns them into the README's stage table. A rule's mem_mb is
# its last measured peak (lamina's own report for a chapter, else the last record), plus 15%.
#
# config (--config name=value): calibration_seeds (130), calibration_jobs (2), force_chapters
# (true: every chapter executes again, with --forcerun chapter; make book FORCE=1), organism_seeds
# ([0]), aligned (the two real models), state (key files and stamps, default build/snakemake),
# records (default benchmarks/snakemake), matrix (list of "chapter:model", default none).

import csv
import math
import sys
from pathlib import Path

from lamina.book.calibration import PAPERS
from lamina.book.keyfile import calibration_key, chapter_key, write_key
from lamina.book.memory import last_peak
from lamina.core.provenance import data_dir
from lamina.core.registry import names as chapter_names
from lamina.sources.organisms import BUILD_MARKER, list_organisms, organism_dir, seed_name
from lamina.sources.organisms.pretrained import PretrainedAlignConfig

ROOT = Path(workflow.basedir).resolve()
PY = sys.executable
LAMINA = f"{PY} -m lamina"
JUPYTER_BOOK = Path(PY).parent / "jupyter-book"
SEEDS = int(config.get("calibration_seeds", 130))
CAL_JOBS = int(config.get("calibration_jobs", 2))
FORCE = " --force" if str(config.get("force_chapters", "")).lower() in ("1", "true") else ""
STATE = Path(config.get("state", ROOT / "build" / "snakemake")).absolute()
RECORDS = Path(config.get("records", ROOT / "benchmarks" / "snakemake")).absolute()
EXECUTED = ROOT / "book" / "executed"
GENERATED = ROOT / "book" / "generated"
HTML = ROOT / "book" / "_build" / "html"

# organisms: folder name (its config hash) -> (organism, seed)
ORGANISMS = {
    organism_dir(seed_name(n, s)).name: (n, s)
    for s in config.get("organism_seeds", [0])
    for n in list_organisms()
}
ORGANISM_ROOT = organism_dir(list_organisms()[0]).parent
ORGANISM_BUILDS = [str(ORGANISM_ROOT / f / BUILD_MARKER) for f in ORGANISMS]

# aligned real models: folder (its config hash) -> model
ALIGNED_ROOT = data_dir() / "aligned"
_ALIGN_HASH = PretrainedAlignConfig().config_hash
ALIGNED = {
    f"{m.replace('/', '--')}-{_ALIGN_HASH}": m
    for m in config.get("aligned", ["smollm2-135m-instruct", "gemma-3-270m"])
}
ALIGNED_BUILDS = [str(ALIGNED_ROOT / f / "build.json") for f in ALIGNED]
READS_ALIGNED = {"weight_update_signature", "organisms"}  # their notebooks read the aligned builds

CHAPTERS = list(chapter_names())
CHAPTER_THREADS = {"weight_update_signature": 2}  # README: it runs alone on 2 threads
MATRIX = {}  # run id -> (chapter, model)
for item in config.get("matrix", []):
    chapter, _, model = str(item).partition(":")
    MATRIX[f"{chapter}--{model.replace('/', '--')}"] = (chapter, model)


def keyfile(name):
    return STATE / "keys" / f"{name}.json"


# The key files are (re)computed where the DAG is built, once per invocation; a job that a
# cluster executor starts re-reads this file but never recomputes them.
if workflow.is_main_process:
    for chapter in CHAPTERS:
        write_key(chapter_key(chapter, book=True), keyfile(f"chapter-{chapter}"))
    for run, (chapter, model) in MATRIX.items():
        write_key(chapter_key(chapter, {"model": model}, book=False), keyfile(f"run-{run}"))
    for paper in range(1, len(PAPERS) + 1):
        write_key(calibration_key(paper, SEEDS), keyfile(f"calibration-{paper}"))


def record(name):
    return str(RECORDS / f"{name}.tsv")


def recorded_mb(name, default_mb):
    """The last benchmark record's peak resident memory of stage ``name`` plus 15% (MB), or
    ``default_mb`` when the stage has no record yet."""
    try:
        with open(record(name), newline="") as f:
            peaks = [float(row["max_rss"]) for row in csv.DictReader(f, delimiter="\t")]
    except (OSError, KeyError, ValueError):
        peaks = []
    peaks = [p for p in peaks if p > 0]
    return math.ceil(max(peaks) * 1.15) if peaks else default_mb


def chapter_mb(wildcards):
    """A chapter's memory: lamina's recorded kernel peak (lamina.book.memory.last_peak, GiB)
    or its benchmark record, whichever is larger, plus 15%."""
    lamina_mb = math.ceil(last_peak(EXECUTED, wildcards.chapter) * 1024 * 1.15)
    return max(lamina_mb, recorded_mb(f"chapter-{wildcards.chapter}", 0))


wildcard_constraints:
    chapter="|".join(CHAPTERS),
    organism="|".join(ORGANISMS) or "none",
    aligned="|".join(ALIGNED) or "none",
    run="|".join(MATRIX) or "none",
    paper="[0-9]+",


rule book:
    input:
        HTML / "index.html",


rule chapters:  # make chapters: every chapter of the book, with the models they read
    input:
        [STATE / "chapters" / f"{c}.report.json" for c in CHAPTERS],


rule matrix:
    input:
        [STATE / "runs" / f"{r}.report.json" for r in MATRIX],


rule organism:
    output:
        str(ORGANISM_ROOT / "{organism}" / BUILD_MARKER),
    params:
        name=lambda w: ORGANISMS[w.organism][0],
        seed=lambda w: ORGANISMS[w.organism][1],
    threads: 1  # one training thread per organism (make organisms)
    resources:
        mem_mb=lambda w: recorded_mb(f"organism-{w.organism}", 4096),
    benchmark:
        record("organism-{organism}")
    shell:
        "cd {ROOT} && {LAMINA} organisms build --name {params.name} --seeds {params.seed} --jobs 1 --no-progress"


rule aligned:
    output:
        str(ALIGNED_ROOT / "{aligned}" / "build.json"),
    params:
        model=lambda w: ALIGNED[w.aligned],
    threads: 2  # README: make aligned, 2 threads
    resources:
        mem_mb=lambda w: recorded_mb(f"aligned-{w.aligned}", 8192),
    benchmark:
        record("aligned-{aligned}")
    shell:
        "cd {ROOT} && export OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
        "LAMINA_NUM_THREADS={threads} && "
        "{PY} -m lamina.sources.organisms.pretrained {params.model:q}"


rule chapter:
    input:
        key=keyfile("chapter-{chapter}"),
        organisms=ORGANISM_BUILDS,  # the key's organisms component (lamina.book.keyfile)
        aligned=lambda w: ALIGNED_BUILDS if w.chapter in READS_ALIGNED else [],
    output:
        STATE / "chapters" / "{chapter}.report.json",
    threads: lambda w: CHAPTER_THREADS.get(w.chapter, 1)
    resources:
        mem_mb=chapter_mb,
    benchmark:
        record("chapter-{chapter}")
    shell:
        "cd {ROOT} && export OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
        "LAMINA_NUM_THREADS={threads} && "
        "{LAMINA} run {wildcards.chapter} --book{FORCE} --out {EXECUTED} "
        "&& cp {EXECUTED}/{wildcards.chapter}.report.json {output}"


rule run:
    input:
        key=keyfile("run-{run}"),
        organisms=ORGANISM_BUILDS,
        aligned=lambda w: ALIGNED_BUILDS if MATRIX[w.run][0] in READS_ALIGNED else [],
    output:
        STATE / "runs" / "{run}.report.json",
    params:
        chapter=lambda w: MATRIX[w.run][0],
        model=lambda w: MATRIX[w.run][1],
        out=lambda w: STATE / "runs" / w.run,
    threads: lambda w: CHAPTER_THREADS.get(MATRIX[w.run][0], 1)
    resources:
        mem_mb=lambda w: recorded_mb(f"run-{w.run}", 4096),
    benchmark:
        record("run-{run}")
    shell:
        "cd {ROOT} && export OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
        "LAMINA_NUM_THREADS={threads} && "
        "{LAMINA} run {params.chapter} --model {params.model:q} --out {params.out} "
        "&& cp {params.out}/{params.chapter}.report.json {output}"


rule calibration_paper:
    input:
        key=keyfile("calibration-{paper}"),
    output:
        STATE / "calibration" / "paper{paper}.json",
    threads: CAL_JOBS  # worker processes of one thread each
    resources:
        mem_mb=lambda w, threads: recorded_mb(f"calibration-paper{w.paper}", 2048 * threads),
    benchmark:
        record("calibration-paper{paper}")
    shell:
        "cd {ROOT} && {PY} workflow/scripts/calibrate_paper.py {wildcards.paper} {SEEDS} {input.key} "
        "{output} --jobs {threads}"


rule calibration_page:
    # every seed is in lamina's calibration cache by now: the page reads them
    input:
        [STATE / "calibration" / f"paper{p}.json" for p in range(1, len(PAPERS) + 1)],
    output:
        page=GENERATED / "calibration.md",
        outcomes=GENERATED / "calibration.json",
    threads: 1
    resources:
        mem_mb=lambda w: recorded_mb("calibration-page", 2048),
    benchmark:
        record("calibration-page")
    shell:
        "cd {ROOT} && {PY} -m lamina.book.calibration {output.page} {SEEDS} --jobs {threads}"


rule methods:
    input:  # the page quotes lamina's definitions: any source file may change it
        sorted(str(p) for p in (ROOT / "lib" / "lamina").rglob("*.py")),
    output:
        GENERATED / "definitions.md",
    threads: 1
    resources:
        mem_mb=lambda w: recorded_mb("methods", 2048),
    benchmark:
        record("methods")
    shell:
        "cd {ROOT} && {LAMINA} methods"


rule pages:
    input:
        chapters=[STATE / "chapters" / f"{c}.report.json" for c in CHAPTERS],
        runs=[STATE / "runs" / f"{r}.report.json" for r in MATRIX],
        outcomes=GENERATED / "calibration.json",
    output:
        [GENERATED / f"{p}.md" for p in ("scorecard", "abstract", "comparison", "reproducibility")],
        GENERATED / "static" / "calibration-marks.css",
    threads: 1
    resources:
        mem_mb=lambda w: recorded_mb("pages", 2048),
    benchmark:
        record("pages")
    shell:
        "cd {ROOT} && {LAMINA} pages"


rule html:
    input:
        rules.pages.output,
        [STATE / "chapters" / f"{c}.report.json" for c in CHAPTERS],
        GENERATED / "definitions.md",
        GENERATED / "calibration.md",
        ROOT / "_toc.yml",
        ROOT / "_config.yml",
        sorted(str(p) for p in (ROOT / "book").glob("*.md")),
    output:
        HTML / "index.html",
    threads: 1
    resources:
        mem_mb=lambda w: recorded_mb("html", 2048),
    benchmark:
        record("html")
    shell:  # as make html: Sphinx rereads every page after a failed build
        "cd {ROOT} && (test -f book/_build/.lamina-html-ok || rm -rf book/_build/.doctrees) "
        "&& rm -f book/_build/.lamina-html-ok "
        "&& {JUPYTER_BOOK} build . --path-output book -W --keep-going "
        "&& touch book/_build/.lamina-html-ok"
