"""Model organisms: objectives, determinism, checkpoints, discovery and errors (micro configs)."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lamina.sources import organisms
from lamina.sources.organisms.checkpoints import (
    read_optimizer_state,
    restore_optimizer,
    save_checkpoint,
)
from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.corpus import clean_markdown, load_corpus
from lamina.sources.organisms.evaluate import unigram_perplexity
from lamina.sources.organisms.objectives import dpo_loss, lm_loss, sequence_logprob, sft_loss
from lamina.sources.organisms.tokenizer import train_tokenizer
from lamina.sources.organisms.train import (
    checkpoint_steps,
    lr_at,
    make_model,
    make_optimizer,
    pretrain,
    random_windows,
)

MICRO = ORGANISMS["organism-llama-micro"]
TEXT = [
    "The cat sat on the mat. The dog ran to the park. A bank by the river; a bank for money.\n"
    * 20,
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer.\n" * 20,
]


@dataclass
class _StandInCurriculum:
    text: list[str]
    sft: list[tuple[str, str]]
    dpo: list[tuple[str, str, str]]
    sft_eval: list[tuple[str, str]]
    dpo_eval: list[tuple[str, str, str]]

    def stats(self) -> dict[str, int]:
        return {"n_text": len(self.text)}


def _stand_in_generate_curriculum(seed: int, n_docs: int) -> _StandInCurriculum:
    rng = random.Random(seed)
    words = {"cat": "animal", "dog": "animal", "owl": "animal", "bread": "food", "rice": "food"}
    text = [f"The {w} is a kind of {words[w]}." for w in rng.choices(list(words), k=n_docs)]
    qa = [(f"Is a {w} an animal or a food?", c) for w, c in words.items()]
    dpo = [(q, a, "food" if a == "animal" else "animal") for q, a in qa]
    return _StandInCurriculum(text, qa[:3], dpo[:3], qa[3:], dpo[3:])


@pytest.fixture(scope="module", autouse=True)
def curriculum_available():
    """Use the real curriculum when present; a tiny stand-in with the same interface otherwise."""
    if importlib.util.find_spec("lamina.sources.organisms.curriculum") is not None:
        yield
        return
    mod = types.ModuleType("lamina.sources.organisms.curriculum")
    mod.generate_curriculum = _stand_in_generate_curriculum  # type: ignore[attr-defined]
    sys.modules["lamina.sources.organisms.curriculum"] = mod
    yield
    del sys.modules["lamina.sources.organisms.curriculum"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXT, 300)


@pytest.fixture(scope="module")
def built_root(micro_organisms) -> Path:
    """The organisms folder of the micro organisms built once per run (read only here)."""
    return micro_organisms / "organisms"


# --- objectives against hand computations ------------------------------------------------


def _toy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0]]])  # (1, 3, 3)
    ids = torch.tensor([[0, 1, 2]])
    return logits, ids


def _logp(row: list[float], k: int) -> float:
    return row[k] - math.log(sum(math.exp(v) for v in row))


def test_lm_loss_matches_hand_computation():
    logits, ids = _toy_batch()
    hand = -(_logp([2.0, 0.0, 0.0], 1) + _logp([0.0, 1.0, 0.0], 2)) / 2
    assert float(lm_loss(logits, ids)) == pytest.approx(hand, rel=1e-6)


def test_sft_loss_scores_only_answer_tokens():
    logits, ids = _toy_batch()
    mask = torch.tensor([[0, 0, 1]])  # only token 2 (predicted at position 1) is an answer token
    hand = -_logp([0.0, 1.0, 0.0], 2)
    assert float(sft_loss(logits, ids, mask)) == pytest.approx(hand, rel=1e-6)
    changed = logits.clone()
    changed[0, 0] = torch.tensor([-5.0, 9.0, 1.0])  # the prompt position's prediction
    assert float(sft_loss(changed, ids, mask)) == pytest.approx(hand, rel=1e-6)
    assert float(sequence_logprob(logits, ids, mask)[0]) == pytest.approx(-hand, rel=1e-6)


def test_dpo_loss_matches_hand_computation():
    beta = 0.5
    pc, pr = torch.tensor([-1.0, -4.0]), torch.tensor([-3.0, -2.0])  # policy: chosen, rejected
    rc, rr = torch.tensor([-2.0, -3.0]), torch.tensor([-2.5, -2.5])  # reference
    margins = [(-1 + 2) - (-3 + 2.5), (-4 + 3) - (-2 + 2.5)]
    hand = -sum(math.log(1 / (1 + math.exp(-beta * m))) for m in margins) / 2
    assert float(dpo_loss(pc, pr, rc, rr, beta)) == pytest.approx(hand, rel=1e-6)
    assert float(dpo_loss(pc, pr, pc, pr, beta)) == pytest.approx(math.log(2), rel=1e-6)


def test_unigram_perplexity_matches_hand_computation():
    train = torch.tensor([0, 0, 0, 1])  # add-one counts 4, 2, 1 over V = 3 -> p = 4/7, 2/7, 1/7
    windows = torch.tensor([[2, 0, 1]])  # targets 0 and 1
    hand = math.exp(-(math.log(4 / 7) + math.log(2 / 7)) / 2)
    assert unigram_perplexity(train, windows, 3) == pytest.approx(hand, rel=1e-9)


# --- schedules ---------------------------------------------------------------------------


def test_checkpoint_schedule_is_log_spaced_dense_early_sparse_late():
    steps = checkpoint_steps(500, 10)
    assert steps[0] == 0 and steps[-1] == 500 and len(steps) >= 9
    gaps = [b - a for a, b in zip(steps[1:], steps[2:], strict=False)]
    assert gaps == sorted(gaps) and gaps[-1] > 10 * gaps[0]


def test_lr_warms_up_then_decays_to_the_floor():
    lrs = [lr_at(t, 100, 1.0, 10, 0.1) for t in range(100)]
    assert lrs[0] == pytest.approx(0.1) and max(lrs) == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3) and lrs[10:] == sorted(lrs[10:], reverse=True)


# --- determinism and checkpoints ------------------------------------------------------------


def _train(seed: int, tokenizer, steps: int = 4):
    cfg = MICRO.replace(seed=seed)
    model = make_model(cfg, tokenizer)
    stream = torch.tensor(tokenizer(" ".join(TEXT))["input_ids"])
    val = stream[: 2 * cfg.context].view(2, cfg.context)
    pretrain(cfg, model, tokenizer, stream, val, None, progress=False, steps=steps)  # type: ignore[arg-type]
    return model


def test_same_seed_gives_identical_weights_after_training(tokenizer):
    a, b, c = _train(0, tokenizer), _train(0, tokenizer), _train(1, tokenizer)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_checkpoint_round_trip_restores_weights_and_optimizer_state(tokenizer, tmp_path):
    cfg = MICRO
    model = make_model(cfg, tokenizer)
    opt = make_optimizer(model, cfg, 1e-3)
    stream = torch.tensor(tokenizer(" ".join(TEXT))["input_ids"])
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = random_windows(stream, 2, cfg.context, gen)
        opt.zero_grad()
        lm_loss(model(input_ids=x).logits, x).backward()
        opt.step()
    save_checkpoint(tmp_path, model, tokenizer, opt, {"step": 3})
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    for (n, p), (_, q) in zip(model.named_parameters(), loaded.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    state = read_optimizer_state(tmp_path)
    opt2 = make_optimizer(loaded, cfg, 1e-3)
    restore_optimizer(loaded, opt2, tmp_path)
    for n, p in model.named_parameters():
        assert int(state[n]["step"]) == 3
        assert torch.equal(state[n]["exp_avg"], opt.state[p]["exp_avg"]), n
        assert torch.equal(state[n]["exp_avg_sq"], opt.state[p]["exp_avg_sq"]), n
    x = random_windows(stream, 2, cfg.context, gen)  # one more identical step on both
    for m, o in ((model, opt), (loaded, opt2)):
        o.zero_grad()
        lm_loss(m(input_ids=x).logits, x).backward()
        o.step()
    for (n, p), (_, q) in zip(model.named_parameters(), loaded.named_parameters(), strict=True):
        assert torch.equal(p, q), n


# --- tokenizer and corpus ------------------------------------------------------------------


def test_tokenizer_training_is_deterministic_and_loads_with_autotokenizer(tokenizer, tmp_path):
    again = train_tokenizer(TEXT, 300)
    assert again.get_vocab() == tokenizer.get_vocab()
    tokenizer.save_pretrained(tmp_path)
    auto = AutoTokenizer.from_pretrained(tmp_path)
    text = "A bank by the river, café ☕."
    assert auto.decode(auto(text)["input_ids"]) == text
    assert auto.eos_token == "<|endoftext|>"


def test_markdown_cleaning_turns_speakers_into_labels():
    md = "# Play\n\n**HAMLET**  \nTo be, or not  \n_Exit_\n"
    assert clean_markdown(md) == "Play\n\nHAMLET:\nTo be, or not\nExit\n"


def test_corpus_splits_are_deterministic_and_disjoint():
    a, b = load_corpus(MICRO), load_corpus(MICRO)
    assert a.train == b.train and a.val == b.val and a.heldout == b.heldout
    nat = a.card["natural_text"]
    assert set(nat["plays_val"]).isdisjoint(nat["plays_train"])
    assert set(nat["plays_heldout"]).isdisjoint(nat["plays_train"] + nat["plays_val"])
    assert a.card["natural_text"]["licence"].startswith("MIT")


# --- built organisms: discovery, loading, errors --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["organism-llama-micro", "organism-gpt2-micro"])
def test_every_listed_checkpoint_resolves_and_loads(built_root, name):
    specs = organisms.list_checkpoints(name, root=built_root)
    assert {f"{name}@{s}" for s in ("step-0", "final", "lm", "sft", "dpo")} <= set(specs)
    assert sum("@step-" in s for s in specs) >= 8
    for spec in specs:
        folder = organisms.resolve(spec, root=built_root)
        model = AutoModelForCausalLM.from_pretrained(folder)
        tok = AutoTokenizer.from_pretrained(folder)
        assert model.config.vocab_size == len(tok)
        opt_state = organisms.load_optimizer_state(spec, root=built_root)
        assert set(opt_state) == {n for n, _ in model.named_parameters()}
    assert organisms.resolve(name, root=built_root) == organisms.resolve(
        f"{name}@final", root=built_root
    )


@pytest.mark.slow
def test_alignment_stages_start_from_final_and_move_away(built_root):
    name = "organism-llama-micro"
    final = AutoModelForCausalLM.from_pretrained(organisms.resolve(name, root=built_root))
    for stage in ("lm", "sft", "dpo"):
        m = AutoModelForCausalLM.from_pretrained(
            organisms.resolve(f"{name}@{stage}", root=built_root)
        )
        diffs = [
            float((p - q).detach().abs().max())
            for p, q in zip(final.parameters(), m.parameters(), strict=True)
        ]
        assert 0 < max(diffs) < 1.0, stage
        st = organisms.load_optimizer_state(f"{name}@{stage}", root=built_root)
        assert all(int(s["step"]) == ORGANISMS[name].align_steps for s in st.values())


@pytest.mark.slow
def test_build_is_idempotent_and_cached_by_config_hash(built_root):
    name = "organism-gpt2-micro"
    folder = organisms.organism_dir(name, root=built_root)
    marker = (folder / "build.json").stat().st_mtime_ns
    assert organisms.build(name, root=built_root, progress=False) == folder
    assert (folder / "build.json").stat().st_mtime_ns == marker
    assert folder.name == f"{name}-{ORGANISMS[name].config_hash}"
    assert ORGANISMS[name].replace(seed=1).config_hash != ORGANISMS[name].config_hash
    assert not [p for p in built_root.iterdir() if p.name.startswith(".tmp")]


@pytest.mark.slow
def test_unknown_checkpoint_error_lists_existing_checkpoints(built_root):
    with pytest.raises(organisms.UnknownCheckpointError, match="step-0.*final.*sft"):
        organisms.resolve("organism-llama-micro@step-99999", root=built_root)


def test_unknown_organism_error_lists_known_organisms(tmp_path):
    with pytest.raises(organisms.UnknownOrganismError, match="organism-gpt2.*organism-llama"):
        organisms.resolve("organism-mamba@sft", root=tmp_path)
    with pytest.raises(ValueError):
        organisms.list_checkpoints("organism-mamba", root=tmp_path)


def test_not_built_error_says_how_to_build(tmp_path):
    with pytest.raises(organisms.OrganismNotBuiltError, match="python -m lamina.sources.organisms build"):
        organisms.resolve("organism-llama@sft", root=tmp_path)


def test_list_organisms_names_both_architectures_and_hides_micro_by_default():
    assert organisms.list_organisms() == ["organism-gpt2", "organism-llama"]
    assert "organism-llama-micro" in organisms.list_organisms(micro=True)


def test_cli_list_reports_unbuilt_organisms_with_build_hint(tmp_path, capsys):
    from lamina.sources.organisms.__main__ import main

    assert main(["list", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "organism-llama: not built" in out and "make organisms" in out


def test_cli_build_refuses_jobs_below_one(tmp_path):
    from lamina.sources.organisms.__main__ import main

    with pytest.raises(SystemExit):
        main(["build", "--name", "organism-gpt2-micro", "--jobs", "0", "--root", str(tmp_path)])


def test_cli_parallel_build_names_the_organism_whose_child_failed(tmp_path):
    """A child that fails (an unknown organism) fails the whole build, named; the other builds."""
    from lamina.sources.organisms.__main__ import main

    names = ["--name", "organism-nonesuch", "--name", "organism-gpt2-micro"]
    with pytest.raises(SystemExit, match="organism-nonesuch"):
        main(["build", *names, "--jobs", "2", "--root", str(tmp_path), "--no-progress"])
    assert list(tmp_path.glob("organism-gpt2-micro-*/build.json"))


def test_training_threads_do_not_follow_the_machine(monkeypatch):
    """A build trains on the same thread count on every machine (a 16-core machine used to
    train on 16 threads and drift from a 2-core build); an override must be a positive integer."""
    from lamina.sources.organisms import ORGANISMS
    from lamina.sources.organisms.build import TRAIN_THREADS, num_threads

    monkeypatch.delenv("LAMINA_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert num_threads(ORGANISMS["organism-llama"]) == TRAIN_THREADS == 1
    monkeypatch.setenv("LAMINA_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="LAMINA_NUM_THREADS"):
        num_threads(ORGANISMS["organism-llama"])
