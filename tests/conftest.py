"""Shared fixtures: tiny random models of each architecture, built offline from configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PEER = Path(__file__).resolve().parents[1].parent / "shared" / "peer" / "latent-trajectories"

SAMPLE_TEXT = [
    "The cat sat on the mat while the dog slept by the door.",
    "A river bank is not the same as a bank that keeps money.",
    "If all birds can fly and a robin is a bird, then a robin can fly.",
    "Seven plus five is twelve, and twelve minus three is nine.",
    "She felt happy, then sad, then calm again by the evening.",
]


def _byte_tokenizer(padding_side: str = "right", texts: list[str] | None = None, vocab_size: int = 320):
    """A byte-level BPE trained here on ``texts`` (default: :data:`SAMPLE_TEXT` four times)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SAMPLE_TEXT * 4 if texts is None else texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    fast.padding_side = padding_side
    return fast


@pytest.fixture(scope="session")
def byte_tokenizer():
    return _byte_tokenizer()


def tiny_model(arch: str, vocab_size: int = 320, n_layers: int = 3) -> torch.nn.Module:
    """A tiny random model of ``arch`` in eval mode, seeded."""
    from transformers import (
        BertConfig,
        BertModel,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab_size,
            n_positions=64,
            n_embd=32,
            n_layer=n_layers,
            n_head=4,
            bos_token_id=0,
            eos_token_id=0,
        )
        model = GPT2LMHeadModel(cfg)
    elif arch == "llama":
        cfg = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        model = LlamaForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = Qwen2Config(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        model = Qwen2ForCausalLM(cfg)
    elif arch in ("gemma3", "gemma3_text"):
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        # both attention types, and a window (4 tokens) shorter than the test texts
        types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
        cfg = Gemma3TextConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            query_pre_attn_scalar=8,
            max_position_embeddings=64,
            sliding_window=4,
            layer_types=types,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        model = Gemma3ForCausalLM(cfg)
    elif arch in LLAMA_LIKE_ROWS:
        import transformers

        config_cls, model_cls = LLAMA_LIKE_ROWS[arch]
        cfg = getattr(transformers, config_cls)(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        model = getattr(transformers, model_cls)(cfg)
    elif arch == "bert":
        cfg = BertConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            max_position_embeddings=64,
            pad_token_id=0,
        )
        model = BertModel(cfg)
    else:
        raise ValueError(arch)
    # random init leaves weights small; scale them up so layers actually change the stream
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(3.0)
        if arch in ("gemma3", "gemma3_text"):  # Gemma's norms scale by (1 + w), w = 0 at init: perturb them
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.add_(0.2 * torch.randn_like(p))
    model.eval()
    model.lamina_name = f"tiny-{arch}"
    return model


ARCHS = ["gpt2", "llama", "qwen2", "gemma3", "bert"]

# The other model types of lamina.sources.models.ADAPTERS' Llama-like row: (config, model) class names.
LLAMA_LIKE_ROWS = {
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM"),
}
# One tiny model per model type that an ADAPTERS row names: the table-driven fixture below
# gives each of them the same equivalence tests (tests/states/test_extract.py).
ADAPTER_ARCHS = [("gemma3_text" if a == "gemma3" else a) for a in ARCHS] + [*LLAMA_LIKE_ROWS]


@pytest.fixture(scope="session", params=ADAPTER_ARCHS)
def adapter_model(request) -> tuple[str, torch.nn.Module]:
    """(model_type, tiny random model) for every model type of every ADAPTERS row."""
    return request.param, tiny_model(request.param)


@pytest.fixture(params=ARCHS)
def arch(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def tiny_models():
    return {a: tiny_model(a) for a in ARCHS}


@pytest.fixture
def peer_root() -> Path:
    if not PEER.is_dir():
        pytest.skip("../shared/peer/latent-trajectories is absent")
    return PEER


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory) -> dict[str, Path]:
    """Tiny random causal LMs saved as Hugging Face folders with a tokenizer, so that
    ``lamina.load_model(str(path))`` (and hence any chapter's ``model`` parameter) loads them."""
    root = tmp_path_factory.mktemp("tiny-models")
    tok = _byte_tokenizer()
    dirs = {}
    for arch in ("gpt2", "llama"):
        folder = root / arch
        tiny_model(arch, n_layers=4).save_pretrained(folder)
        tok.save_pretrained(folder)
        dirs[arch] = folder
    return dirs


class QuickBook:
    """Every chapter executed in quick mode on tiny models, and the HTML built from them."""

    def __init__(self, root: Path, chapters: list[str]):
        self.root = root
        self.chapters = chapters
        self.executed = root / "book" / "executed"
        self.html = root / "book" / "_build" / "html"


MICRO_ORGANISMS = ["organism-gpt2-micro", "organism-llama-micro"]


@pytest.fixture(scope="session")
def micro_organisms(tmp_path_factory) -> Path:
    """A LAMINA_DATA folder holding both micro organisms, built once per test run (seconds).

    Fixtures that need organisms point LAMINA_DATA here with :func:`lamina_env` and their own
    LAMINA_RESULTS; nothing writes into its ``organisms/`` folder after the build."""
    from lamina.sources import organisms

    root = tmp_path_factory.mktemp("micro-organisms")
    for name in MICRO_ORGANISMS:
        organisms.build(name, root=root / "organisms", progress=False, log=lambda s: None)
    return root


def lamina_env(data: Path, results: Path):
    """Set LAMINA_DATA and LAMINA_RESULTS for this process (and so for the papermill kernels it
    starts); restore them on exit."""
    from lamina.core.provenance import temporary_environ

    return temporary_environ({"LAMINA_DATA": str(data), "LAMINA_RESULTS": str(results)})


def quick_parameters(tiny: dict[str, Path]) -> dict[str, dict]:
    """Parameters that make each chapter run in seconds on tiny models. The trajectory
    chapters need at least 4 blocks, so they use the tiny random models; the others use the
    micro organisms (they need a training history)."""
    return {
        "convergence": {"model": str(tiny["gpt2"])},
        "curvature": {"model": str(tiny["llama"])},
        "bifurcation": {"model": str(tiny["gpt2"])},
        "three_phase": {"model": str(tiny["llama"])},
        "weight_update_signature": {"model": "organism-llama-micro", "k_sweep": [1, 4, 8, 16]},
        "layer_anatomy": {"model": str(tiny["llama"]), "corpus": "organism-llama-micro"},
        "growth_training": {"model": "organism-llama-micro"},
        "organisms": {"model": "organism-gpt2-micro"},
        "trajectory_tour": {"model": [str(tiny["gpt2"]), str(tiny["llama"])]},
        "reanalysis": {"real_models": [str(tiny["llama"])]},
    }


@pytest.fixture(scope="session")
def calibration_cache(tmp_path_factory) -> Path:
    """One folder for the session's calibration caches: the quick book's page and the
    calibration page's own test compute seed 0 of each paper once (several CPU minutes a paper)
    and paper 1's levers once (about 10 CPU minutes: lamina.trajectory.levers), and read them
    thereafter; link it in with :func:`link_calibration_cache`."""
    return tmp_path_factory.mktemp("calibration-cache")


def link_calibration_cache(data: Path, cache: Path) -> None:
    """Make ``<data>/cache/calibration`` a link to the session's ``cache``/calibration, and
    ``<data>/cache/levers`` one to the checkout's own ``data/cache/levers``, which the tests
    that leave LAMINA_DATA unset solve paper 1's levers into (each cache is keyed by what
    changes it, so sharing it changes no result)."""
    (data / "cache").mkdir(parents=True, exist_ok=True)
    (cache / "calibration").mkdir(exist_ok=True)
    levers = Path(__file__).resolve().parents[1] / "data" / "cache" / "levers"
    levers.mkdir(parents=True, exist_ok=True)
    for name, target in (("calibration", cache / "calibration"), ("levers", levers)):
        (data / "cache" / name).symlink_to(target, target_is_directory=True)


@pytest.fixture(scope="session")
def quick_book(tmp_path_factory, tiny_model_dirs, micro_organisms, calibration_cache) -> QuickBook:
    """Execute every chapter (quick mode, :func:`quick_parameters`) into a copy of the book's
    sources, then build it with Jupyter Book, -W."""
    import shutil
    import subprocess
    import sys

    from lamina.book import CHAPTERS, execute_chapter

    quick = quick_parameters(tiny_model_dirs)

    repo = Path(__file__).resolve().parents[1]
    root = tmp_path_factory.mktemp("quick-book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(repo / name, root / name)
    shutil.copytree(
        repo / "book", root / "book", ignore=shutil.ignore_patterns("_build", "executed", "runs")
    )
    data = root / "data"
    with lamina_env(data, data / "results"):
        shutil.copytree(micro_organisms / "organisms", data / "organisms")
        for chapter in CHAPTERS:
            params = {"quick": True, **quick.get(chapter, {})}
            execute_chapter(chapter, root / "book" / "executed", params, progress=False, book=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "lamina.book",
                "methods",
                "--out",
                str(root / "book" / "generated" / "definitions.md"),
            ],
            check=True,
        )
        subprocess.run(
            [sys.executable, "-m", "lamina.book", "pages", "--root", str(root)], check=True
        )
        calibration = root / "book" / "generated" / "calibration.md"
        link_calibration_cache(data, calibration_cache)
        subprocess.run([sys.executable, "-m", "lamina.book.calibration", str(calibration), "1", "--jobs", "1"], check=True)
        jb = Path(sys.executable).parent / "jupyter-book"
        build = subprocess.run(
            [
                str(jb),
                "build",
                str(root),
                "--path-output",
                str(root / "book"),
                "-W",
                "--keep-going",
            ],
            capture_output=True,
            text=True,
        )
        assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-2000:]
    return QuickBook(root, list(CHAPTERS))
