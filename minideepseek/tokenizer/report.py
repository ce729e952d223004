"""tokenizer_eval.md: held-out metrics per source and tokenizer on both held-out splits."""

from __future__ import annotations

from typing import Any

_SPLIT_TITLE = {
    "component": "Out-of-component held-out (whole packages/origins never trained on — the honest figure)",
    "random": "Random held-out (documents of trained-on components; flatters the tokenizer)",
}


def _table(per_source: dict[str, Any]) -> list[str]:
    lines = ["| source (domain) | tokenizer | docs | tokens/char | ours/DeepSeek-V3 | tokens/word | bytes/token "
             "| fragmentation <=2 chars | unk rate | raw round trip |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for source, by_tok in per_source.items():
        for name, m in by_tok.items():
            frag = f"{100 * m['fragmentation_le2']:.1f}%" if "fragmentation_le2" in m else ""
            unk = f"{m['unk_rate']:.4%}" if "unk_rate" in m else "n/a"
            ratio = f"{m['vs_deepseek_tokens_per_char']:.3f}" if "vs_deepseek_tokens_per_char" in m else ""
            rt = f"{m['round_trip_ok']}/{m['docs']}" if "round_trip_ok" in m else ""
            lines.append(f"| {source} ({m['domain']}) | {name} | {m['docs']} | {m['tokens_per_char']:.3f} | {ratio} | "
                         f"{m['tokens_per_word']:.3f} | {m['bytes_per_token']:.2f} | {frag} | {unk} | {rt} |")
    return lines


def eval_markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Tokenizer evaluation (held-out documents)", "",
        f"Vocabulary: {r['vocab_size_final']:,} (target {r['vocab_size_target']:,}"
        + (")" if r["reached_target"] else f"; NOT reached: {r['why_not']})")
        + f"; normalizer `{r['normalizer']}`" + (" (lossless)" if r.get("lossless") else " (LOSSY: rewrites text, below)")
        + f"; pre-tokenizer `{r['pre_tokenizer']}`; special tokens "
        + ", ".join(f"`{t}`={i}" for i, t in enumerate(r["special_tokens"])) + ".", "",
        "Raw round trip `decode(encode(x)) == x` over both held-out splits: "
        + ", ".join(f"{k} {v['ok']}/{v['docs']}" for k, v in r["round_trip"].items())
        + f". Vocabulary utilization on random held-out text: {100 * r['vocab_utilization']:.1f}% "
        f"({r['vocab_seen']:,} ids).", "",
    ]
    cov = r.get("eval_coverage") or {}
    if cov.get("capped"):
        capped = [(x, cov["splits"][x.split("/", 1)[0]][x.split("/", 1)[1]]) for x in cov["capped"]]
        lines += [f"Evaluated on at most {cov['max_chars']:,} characters per held-out split and source "
                  "(`tokenizer.eval_max_chars`); capped: "
                  + ", ".join(f"{x} ({c['docs']:,} of {c['heldout_docs']:,} docs)" for x, c in capped)
                  + ". The rest of those documents is still held out of training.", ""]
    splits = r.get("splits") or {"random": {"per_source": r["per_source"]}}
    for k, sp in splits.items():
        lines += [f"## {_SPLIT_TITLE.get(k, k)}", ""]
        lines += _table(sp["per_source"]) if sp["per_source"] else ["(no documents in this split)"]
        lines.append("")
    changes = r.get("normalizer_changes") or {}
    if changes:
        lines += [f"## What the `{r['normalizer']}` normalizer rewrites (held-out text, both splits)", "",
                  "Tokens of rewritten text decode to the rewritten form: a model trained on them can never emit "
                  "the original characters.", "",
                  "| source (domain) | chars | changed | share | docs changed | most frequent rewrites |",
                  "|---|---:|---:|---:|---:|---|"]
        for s, c in changes.items():
            top = ", ".join(f"`{x['from']}`→`{x['to']}` ×{x['count']:,}" for x in c["top_rewrites"][:6])
            lines.append(f"| {s} ({c['domain']}) | {c['chars']:,} | {c['chars_changed']:,} | "
                         f"{100 * c['changed_share']:.3f}% | {c['docs_changed']}/{c['docs']} | {top} |")
        lines.append("")
    lines += ["## Training sample and held-out splits (stratified by source)", "",
              "| source | docs | components | held out: components (docs, chars) | held out at random | train docs "
              "| train chars | share of sample | floor applied | every-10th share (seed) |",
              "|---|---:|---:|---|---:|---:|---:|---:|:-:|---:|"]
    for s, v in r["sample"].items():
        comps = ", ".join(v.get("components_heldout", [])) or "none"
        lines.append(f"| {s} | {v['docs']:,} | {v.get('components', '')} | {comps} ({v.get('heldout_component_docs', 0):,}, "
                     f"{v.get('heldout_component_chars', 0):,}) | {v['heldout_docs']:,} | {v['train_docs']:,} | "
                     f"{v['train_chars']:,} | {100 * v['train_char_share']:.1f}% | "
                     f"{'yes' if v['floor_applied'] else 'no'} | {100 * v['every_10th_char_share']:.1f}% |")
    capped = {s: v for s, v in r["sample"].items() if v.get("capped_from_docs")}
    if capped:
        lines += ["", "The sample was over `tokenizer.max_train_chars`: each source kept the same share of its "
                  "sample (train docs before the ceiling: " + ", ".join(f"{s} {v['capped_from_docs']:,}"
                                                                      for s, v in capped.items()) + ")."]
    t = r["tokens"]
    lines += ["", "## Longest learned tokens", "", ", ".join(f"`{x}`" for x in t["longest"]), "",
              f"## Strange tokens ({t['strange_count']:,}: long single-character runs, mixed scripts, URL/markup "
              "fragments) — distinct sample, escaped", "", ", ".join(f"`{x}`" for x in t["strange_sample"]) or "none", ""]
    if "partial_utf8_count" in t:
        lines += [f"{t['partial_utf8_count']:,} tokens are pieces of a multi-byte character (normal for byte-level "
                  "BPE: rare CJK characters are spelled in bytes), e.g. "
                  + ", ".join(f"`{x}`" for x in t["partial_utf8_sample"]), ""]
    return "\n".join(lines) + "\n"
