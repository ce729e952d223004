"""tokenizer_eval.md: the side-by-side table of held-out metrics per source and tokenizer."""

from __future__ import annotations

from typing import Any


def eval_markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Tokenizer evaluation (held-out documents)", "",
        f"Vocabulary: {r['vocab_size_final']:,} (target {r['vocab_size_target']:,}"
        + (")" if r["reached_target"] else f"; NOT reached: {r['why_not']})")
        + f"; normalizer {r['normalizer']}; pre-tokenizer `{r['pre_tokenizer']}`; special tokens "
        + ", ".join(f"`{t}`={i}" for i, t in enumerate(r["special_tokens"])) + ".", "",
        "Round trip `decode(encode(x)) == NFKC(x)` (ours; the references against x): "
        + ", ".join(f"{k} {v['ok']}/{v['docs']}" for k, v in r["round_trip"].items())
        + f". Vocabulary utilization on held-out text: {100 * r['vocab_utilization']:.1f}% "
        f"({r['vocab_seen']:,} ids).", "",
        "| source (domain) | tokenizer | docs | tokens/char | tokens/word | bytes/token | fragmentation <=2 chars "
        "| unk rate |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for source, by_tok in r["per_source"].items():
        for name, m in by_tok.items():
            frag = f"{100 * m['fragmentation_le2']:.1f}%" if "fragmentation_le2" in m else ""
            unk = f"{m['unk_rate']:.4%}" if "unk_rate" in m else "n/a"
            lines.append(f"| {source} ({m['domain']}) | {name} | {m['docs']} | {m['tokens_per_char']:.3f} | "
                         f"{m['tokens_per_word']:.3f} | {m['bytes_per_token']:.2f} | {frag} | {unk} |")
    lines += ["", "## Training sample (stratified by source)", "",
              "| source | docs | held out | train docs | train chars | share of sample | floor applied | "
              "every-10th share (seed) |", "|---|---:|---:|---:|---:|---:|:-:|---:|"]
    for s, v in r["sample"].items():
        lines.append(f"| {s} | {v['docs']:,} | {v['heldout_docs']:,} | {v['train_docs']:,} | {v['train_chars']:,} | "
                     f"{100 * v['train_char_share']:.1f}% | {'yes' if v['floor_applied'] else 'no'} | "
                     f"{100 * v['every_10th_char_share']:.1f}% |")
    t = r["tokens"]
    lines += ["", "## Longest learned tokens", "", ", ".join(f"`{x}`" for x in t["longest"]), "",
              f"## Strange tokens ({t['strange_count']:,}: long single-character runs, mixed scripts, URL/markup "
              "fragments) — sample", "", ", ".join(f"`{x}`" for x in t["strange_sample"]), ""]
    return "\n".join(lines) + "\n"
