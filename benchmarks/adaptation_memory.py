"""Single-group adaptation's peak memory at Gemma 3's vocabulary (issue 52): one AdamW step of
the SFT loss on every parameter ("all"), with the full (B, T, V) logits (``sft_loss``, as
before issue 52) and with the head at the answer positions only
(``lamina.weights.adaptation.answer_sft_loss``), each in a fresh process, side by side.

The model: a 2-layer Llama body (d = 64) with Gemma 3's 262,144-word head, so that the logits
dominate as they do on Gemma 3 (its head is 168M of its 268M parameters); 8 rows of 128 tokens,
16 answer tokens each (the book's real_adapt_batch and real_max_length). Peak: the process's
maximum resident set (ru_maxrss), less its resident set after building the model.

Run: python benchmarks/adaptation_memory.py
"""

from __future__ import annotations

import json
import subprocess
import sys

VOCAB, ROWS, LENGTH, ANSWER = 262_144, 8, 128, 16

CHILD = r"""
import json, resource, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from lamina.sources.organisms.objectives import sft_loss
from lamina.weights.adaptation import answer_sft_loss
V, B, T, A = (int(x) for x in sys.argv[2:6])
torch.manual_seed(0)
torch.set_num_threads(1)
cfg = LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=T)
model = LlamaForCausalLM(cfg).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, V, (B, T))
att = torch.ones_like(ids)
tgt = torch.zeros_like(ids)
tgt[:, T - A:] = 1
b = {"input_ids": ids, "attention_mask": att, "target_mask": tgt}
kb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
before = rss_kib()
if sys.argv[1] == "full":
    loss = sft_loss(model(input_ids=ids, attention_mask=att).logits, ids, tgt)
else:
    loss = answer_sft_loss(model, b)
loss.backward()
opt.step()
print(json.dumps({"peak_mib": (kb() - before) / 1024, "loss": float(loss)}))
"""


def measure(kind: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(VOCAB), str(ROWS), str(LENGTH),
                          str(ANSWER)], check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    full, mine = measure("full"), measure("answers")
    print(f"{ROWS} rows x {LENGTH} tokens, {ANSWER} answer tokens each, vocabulary {VOCAB:,}")
    print(f"full logits (sft_loss):            {full['peak_mib']:8.0f} MiB above the built model")
    print(f"answer positions (answer_sft_loss): {mine['peak_mib']:8.0f} MiB above the built model")
    print(f"ratio: {mine['peak_mib'] / full['peak_mib']:.2f}x; losses {full['loss']:.4f} and "
          f"{mine['loss']:.4f}")


if __name__ == "__main__":
    main()
