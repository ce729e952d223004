"""What the report shows of the data and the model: decoded training samples and generations.

Decoding random packed samples is the first thing to look at when a loss looks wrong (the seed's
troubleshooting order: check lengths, then decode samples for boundaries and garbage, then the
shuffle, and only then the hyperparameters). Generations from a short prompt show what the model
picked up: after a few hundred CPU steps, frequent tokens and local syntax, not sense.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from ..tokenizer.config import EOT_ID
from .loader import SamplePlan
from .model import GPT

PROMPTS = ("def main(", "The ", "import numpy as np\n", "In mathematics, ", "第一回")


def decode_ids(tok: Tokenizer, ids: list[int]) -> str:
    """Text of ``ids`` with each <|endoftext|> shown as a visible boundary marker."""
    parts, cur = [], []
    for i in ids:
        if i == EOT_ID:
            parts.append(tok.decode(cur, skip_special_tokens=False))
            cur = []
        else:
            cur.append(i)
    parts.append(tok.decode(cur, skip_special_tokens=False))
    return " ⟦EOT⟧ ".join(parts)


def packed_samples(plan: SamplePlan, tok: Tokenizer, n: int, rng: np.random.Generator,
                   max_tokens: int = 200) -> list[dict[str, Any]]:
    """``n`` random training samples: their first ``max_tokens`` tokens decoded, their documents."""
    if n == 0:
        return []
    picks = np.sort(rng.choice(len(plan.train_samples), size=min(n, len(plan.train_samples)), replace=False))
    out = []
    for s in plan.train_samples[picks].tolist():
        b = plan.gather(np.array([s]))
        ids = b.tokens[0, :max_tokens].tolist()
        blk, w = divmod(s, plan.windows)
        out.append({"sample": s, "block": blk, "window": w, "tokens": len(ids),
                    "documents_in_window": int(b.segments[0].max()) + 1, "eot": ids.count(EOT_ID),
                    "text": decode_ids(tok, ids)})
    return out


@torch.no_grad()
def generate(model: GPT, tok: Tokenizer, device: torch.device, n_tokens: int, seed: int,
             prompts: tuple[str, ...] = PROMPTS) -> list[dict[str, Any]]:
    """Greedy for the even prompts, temperature 0.8 / top-k 50 (seeded) for the odd ones.

    No KV cache: the context is recomputed per token, which costs nothing at this size."""
    if n_tokens == 0:
        return []
    model.eval()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for k, prompt in enumerate(prompts):
        ids = tok.encode(prompt, add_special_tokens=False).ids
        x = torch.tensor([ids], dtype=torch.long, device=device)
        greedy = k % 2 == 0
        for _ in range(n_tokens):
            logits = model.logits_last(x[:, -model.cfg.max_seq_len:])[0].cpu()
            if greedy:
                nxt = int(logits.argmax())
            else:
                top = torch.topk(logits / 0.8, 50)
                nxt = int(top.indices[torch.multinomial(top.values.softmax(-1), 1, generator=gen)])
            x = torch.cat([x, torch.tensor([[nxt]], device=device)], dim=1)
            if nxt == EOT_ID:
                break
        new = x[0, len(ids):].tolist()
        out.append({"prompt": prompt, "mode": "greedy" if greedy else "temperature 0.8, top-k 50",
                    "text": decode_ids(tok, new), "tokens": len(new)})
    model.train()
    return out
