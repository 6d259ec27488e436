"""Bad input gets a clear error, never a silent wrong answer (issue 14): extraction, its cache,
model loading and the subspace probe. Each test is named after the case it covers; those
marked "BAD n" returned a silently wrong result before the fix. Imports of new names are
inside the tests, so that each test fails on its own against the old code."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import torch

from lamina.states.extract import extract
from tests.conftest import SAMPLE_TEXT, _byte_tokenizer, tiny_model

TEXTS = ["The cat sat on the mat.", "A river bank is muddy.", SAMPLE_TEXT[2]]


def _other_tokenizer():
    """A byte-level BPE trained on other text: same byte alphabet, different merges."""
    return _byte_tokenizer(texts=["zebra quartz jumps over lazy vixens"] * 8, vocab_size=290)


# ------------------------------------------------------------------------- BAD 1: tokenizer
def test_bad1_cache_key_includes_the_tokenizer(tmp_path):
    model = tiny_model("gpt2")
    tok_a, tok_b = _byte_tokenizer(), _other_tokenizer()
    assert tok_a(TEXTS)["input_ids"] != tok_b(TEXTS)["input_ids"]  # the premise
    extract(model, tok_a, TEXTS, pool="mean", cache=tmp_path, progress=False)
    cached_b = extract(model, tok_b, TEXTS, pool="mean", cache=tmp_path, progress=False)
    fresh_b = extract(model, tok_b, TEXTS, pool="mean", progress=False)
    np.testing.assert_array_equal(cached_b.states, fresh_b.states)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2


def test_bad1_tokenizer_fingerprint_sees_special_token_settings():
    from lamina.states.extract_cache import tokenizer_fingerprint

    a, b = _byte_tokenizer(), _byte_tokenizer()
    assert tokenizer_fingerprint(a) == tokenizer_fingerprint(b)
    b.add_special_tokens({"bos_token": "<|bos|>"})
    assert tokenizer_fingerprint(a) != tokenizer_fingerprint(b)


# ------------------------------------------------------------------------- BAD 2: every byte
def test_bad2_fingerprint_hashes_every_byte_of_a_model_over_50M_parameters(tmp_path):
    """The old fingerprint sampled every (numel // 4096)-th value of each tensor of a model
    over 50M parameters. Edit one embedding row that this stride misses, in a 64M model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=50257, n_embd=1024, n_layer=1, n_head=8, n_positions=64)
    model = GPT2LMHeadModel(cfg).eval()
    assert sum(p.numel() for p in model.parameters()) > 50_000_000
    tok = _byte_tokenizer()
    texts = ["cat", "dog"]
    wte = model.transformer.wte.weight
    stride = wte.numel() // 4096
    used = sorted({i for ids in tok(texts)["input_ids"] for i in ids})
    missed = [t for t in used if (t * cfg.n_embd) // stride == ((t + 1) * cfg.n_embd - 1) // stride]
    missed = [t for t in missed if (t * cfg.n_embd) % stride != 0]
    assert missed, "every used row is sampled by the old stride; pick other texts"
    extract(model, tok, texts, pool="mean", cache=tmp_path, progress=False)
    with torch.no_grad():
        wte[missed[0]] += 1.0
    after = extract(model, tok, texts, pool="mean", cache=tmp_path, progress=False)
    fresh = extract(model, tok, texts, pool="mean", progress=False)
    np.testing.assert_array_equal(after.states, fresh.states)


def test_bad2_fingerprint_changes_with_a_single_value_and_handles_bf16():
    from lamina.states.extract_cache import model_fingerprint

    model = tiny_model("llama")
    before = model_fingerprint(model)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight[3, 5] += 1e-6
    assert model_fingerprint(model) != before
    assert model_fingerprint(model.to(torch.bfloat16)) != before


# ------------------------------------------------------------------------- BAD 5: train mode
def test_bad5_extract_in_train_mode_is_deterministic_and_restores_the_mode():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=320, n_embd=32, n_layer=3, n_head=4, n_positions=64)
    cfg.resid_pdrop = cfg.embd_pdrop = cfg.attn_pdrop = 0.5
    model = GPT2LMHeadModel(cfg)
    model.eval()
    reference = extract(model, _byte_tokenizer(), TEXTS, progress=False).states
    model.train()
    model.transformer.h[1].eval()  # a mixed state must come back as it was
    modes = [m.training for m in model.modules()]
    first = extract(model, _byte_tokenizer(), TEXTS, progress=False).states
    second = extract(model, _byte_tokenizer(), TEXTS, progress=False).states
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, reference)
    assert [m.training for m in model.modules()] == modes


# ------------------------------------------------------------------------- BAD 6: NaN weights
def test_bad6_nan_weights_raise_naming_the_text_and_layer():
    from lamina.states.extract import NonFiniteStatesError

    model = tiny_model("gpt2")
    with torch.no_grad():
        model.transformer.h[1].mlp.c_proj.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteStatesError, match=r"layer 2 for texts\[0\] \('The cat"):
        extract(model, _byte_tokenizer(), TEXTS, progress=False)
    with pytest.warns(RuntimeWarning, match="non-finite hidden states, first at layer 2"):
        t = extract(model, _byte_tokenizer(), TEXTS, progress=False, nonfinite="warn")
    assert {"text": 0, "layer": 2} in t.meta["nonfinite"]
    assert {r["layer"] for r in t.meta["nonfinite"]} == {2, 3}


# ------------------------------------------------------------------------- BAD 7: loaded object
def test_bad7_edited_safetensors_header_is_refused_naming_the_file(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from lamina.states.extract import Trajectories, TrajectoriesFileError

    path = tmp_path / "one.safetensors"
    Trajectories(np.zeros((1, 2, 4), np.float32), ["one"], [0, 1]).save(path)
    with safe_open(str(path), framework="numpy") as f:
        header = json.loads(f.metadata()["lamina"])
        states = f.get_tensor("states")
    header["texts"] = ["one", "two", "three"]
    save_file({"states": states}, str(path), metadata={"lamina": json.dumps(header)})
    with pytest.raises(TrajectoriesFileError, match=re.escape(str(path)) + r".*3 texts"):
        Trajectories.load(path)


def test_bad7_trajectories_constructor_checks_consistency():
    from lamina.states.extract import Trajectories

    with pytest.raises(ValueError, match=r"shape \(1, 2, 4\); expected \(3, 2, d\)"):
        Trajectories(np.zeros((1, 2, 4), np.float32), ["a", "b", "c"], [0, 1])
    with pytest.raises(ValueError, match="ids has 1 entries for 2 texts"):
        Trajectories(np.zeros((2, 2, 4), np.float32), ["a", "b"], [0, 1], ids=["x"])
    with pytest.raises(ValueError, match=r"states\[1\] has shape"):
        Trajectories([np.zeros((2, 3, 4)), np.zeros((3, 3, 4))], ["a", "b"], [0, 1])


# ------------------------------------------------------------------------- BAD 8: RSF range
def test_bad8_rsf_rejects_a_non_orthonormal_basis_and_k_above_d():
    from lamina.weights import relative_subspace_fraction

    g = torch.Generator().manual_seed(0)
    delta = torch.randn(6, 5, generator=g, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"not orthonormal: max \|BᵀB - I\|"):
        relative_subspace_fraction(delta, 3.0 * torch.eye(5)[:, :2], "input")
    wide = torch.randn(5, 7, generator=g, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"k=7 columns; need 1 <= k <= d=5"):
        relative_subspace_fraction(delta, wide, "input")


def test_bad8_rsf_accepts_numpy_arrays_and_lists():
    from lamina.weights import relative_subspace_fraction

    delta = np.arange(30, dtype=np.float64).reshape(6, 5)
    basis = np.eye(5)[:, :2]
    expected = relative_subspace_fraction(torch.from_numpy(delta), torch.from_numpy(basis), "input")
    assert relative_subspace_fraction(delta, basis, "input") == pytest.approx(expected)
    assert relative_subspace_fraction(delta.tolist(), basis.tolist(), "input") == pytest.approx(
        expected
    )
    assert 0.0 <= expected <= 1.0


# ------------------------------------------------------------------------- BAD 9: max_length
@pytest.mark.parametrize("value", [-5, 0, 2.5, True, "8"])
def test_bad9_max_length_must_be_an_integer_of_at_least_one(tiny_models, value):
    with pytest.raises(ValueError, match=f"max_length must be an integer >= 1; got {value!r}"):
        extract(tiny_models["gpt2"], _byte_tokenizer(), TEXTS, max_length=value, progress=False)


# ------------------------------------------------------------------------- BAD 10: revision
def test_bad10_revision_with_a_local_folder_or_alias_raises(tiny_model_dirs):
    from lamina import load_model

    folder = str(tiny_model_dirs["gpt2"])
    with pytest.raises(ValueError, match=r"revision='v2' cannot apply to '.*gpt2'"):
        load_model(folder, revision="v2")
    with pytest.raises(ValueError, match=r"revision='main' cannot apply to 'minilm'"):
        load_model("minilm", revision="main")
    model, _ = load_model(folder)
    assert model.lamina_revision is None


# ------------------------------------------------------------------------- POOR: arguments
def test_poor_load_model_none_is_a_type_error():
    from lamina import load_model

    with pytest.raises(TypeError, match="got None"):
        load_model(None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_poor_cuda_device_on_a_cpu_machine_fails_before_loading():
    from lamina import load_model

    # the name does not exist: a device check made after loading would raise ModelNotFoundError
    with pytest.raises(RuntimeError, match="device='cuda' requested but CUDA is not available"):
        load_model("no-such-org/no-such-model", device="cuda")


def test_poor_model_folder_without_config_names_the_cause(tmp_path):
    from lamina import ModelNotFoundError, load_model

    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match=r"'.*empty'.* exists but .*config\.json"):
        load_model(str(tmp_path / "empty"))
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ModelNotFoundError, match=r"'.*corrupt'.* exists but"):
        load_model(str(bad))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 2.5}, ValueError, "batch_size must be an integer >= 1; got 2.5"),
        ({"batch_size": 0}, ValueError, "batch_size must be an integer >= 1; got 0"),
        ({"layers": 2}, TypeError, r"layers must be a list of layer indices \(e.g. \[2\]\)"),
        ({"layers": [1.7]}, TypeError, r"layers must hold integers; got 1.7"),
        ({"cache": 3}, TypeError, "cache must be True, False or a folder path; got 3"),
        ({"nonfinite": "ignore"}, ValueError, "nonfinite must be 'raise' or 'warn'"),
    ],
)
def test_poor_extract_arguments_are_validated_up_front(tiny_models, kwargs, error, message):
    with pytest.raises(error, match=message):
        extract(tiny_models["gpt2"], _byte_tokenizer(), TEXTS, progress=False, **kwargs)


def test_poor_token_ids_beyond_the_vocabulary_name_the_text():
    model = tiny_model("gpt2", vocab_size=64)
    with pytest.raises(
        ValueError, match=r"texts\[0\] \('The cat.*outside the model's vocabulary of 64"
    ):
        extract(model, _byte_tokenizer(), TEXTS, progress=False)


# ------------------------------------------------------------------------- POOR: the cache
def test_poor_corrupt_cache_entry_is_warned_deleted_and_recomputed(tmp_path, tiny_models):
    model, tok = tiny_models["gpt2"], _byte_tokenizer()
    first = extract(model, tok, TEXTS, cache=tmp_path, progress=False)
    (entry,) = tmp_path.glob("*.safetensors")
    entry.write_bytes(entry.read_bytes()[:100])  # truncated
    with pytest.warns(RuntimeWarning, match=re.escape(str(entry))):
        again = extract(model, tok, TEXTS, cache=tmp_path, progress=False)
    np.testing.assert_array_equal(again.states, first.states)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten entry is sound
        extract(model, tok, TEXTS, cache=tmp_path, progress=False)


def test_poor_cache_path_that_is_a_file_fails_before_computing(tmp_path, tiny_models):
    target = tmp_path / "cache.txt"
    target.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=re.escape(str(target))):
        extract(tiny_models["gpt2"], _byte_tokenizer(), TEXTS, cache=target, progress=False)


# ------------------------------------------------------------------------- POOR: files
@pytest.mark.parametrize("damage", ["truncated", "not safetensors", "no lamina key"])
def test_poor_bad_trajectories_files_name_the_path(tmp_path, damage):
    from safetensors.numpy import save_file

    from lamina.states.extract import Trajectories, TrajectoriesFileError

    path = tmp_path / "t.safetensors"
    Trajectories(np.zeros((1, 2, 4), np.float32), ["one"], [0, 1]).save(path)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-8])
    elif damage == "not safetensors":
        path.write_text("hello, I am a text file")
    else:
        save_file({"states": np.zeros((1, 2, 4), np.float32)}, str(path), metadata={"x": "1"})
    with pytest.raises(TrajectoriesFileError, match=re.escape(str(path))):
        Trajectories.load(path)


def test_poor_stale_temporary_from_a_killed_save_is_cleaned(tmp_path):
    """SIGKILL a process in the middle of an atomic write, then save into the same folder."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from lamina.core.provenance import atomic_write_text

    script = (
        "import time\nfrom lamina.core.provenance import atomic_write\n"
        f"def slow(tmp):\n    tmp.write_bytes(b'x' * 4096)\n    time.sleep(60)\n"
        f"atomic_write({str(tmp_path / 'big.bin')!r}, slow)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    try:
        deadline = time.time() + 60
        while not list(tmp_path.glob(".big.bin.*.tmp")) and time.time() < deadline:
            time.sleep(0.1)
        assert list(tmp_path.glob(".big.bin.*.tmp")), "the writer never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert list(tmp_path.glob(".big.bin.*.tmp"))  # left behind by the kill
    live = tmp_path / f".other.json.pid{os.getpid()}.abcdefgh.tmp"  # a writer still running
    live.write_text("in progress")
    atomic_write_text(tmp_path / "small.txt", "hello")
    assert not list(tmp_path.glob(".big.bin.*.tmp"))
    assert live.exists()
