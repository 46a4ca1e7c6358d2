"""Which layer of the Transformer encoder-decoder's cross-attention aligns words? The
AER of the links read off each decoder layer's cross-attention (heads averaged, argmax
over the source for each target word), on the validation and test gold pairs, as Ding
et al. (2019) and Ferrando et al. read NMT attention one layer at a time; the layer with
the lowest validation AER is the one the alignment table reports. Each layer's links
are written to ``--out`` (``faithbench score --alignments`` reads them), and the
translator is cached like any model, so a second run costs only the attention passes.

    python benchmarks/cross_attention_layers.py --data-dir ../shared/data --out runs/cross_attention
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch
from tabulate import tabulate

from faithbench.benchmark.alignments import links_read, score_alignments
from faithbench.benchmark.core.records import write_jsonl_atomic
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import open_session


def layer_links(session, layer: int) -> list[dict]:
    """``{"id", "links"}`` per sentence pair from layer ``layer``'s cross-attention."""
    session.prepared.model.attention_layer = layer
    fresh = session.on(session.examples)  # nothing cached: every layer is explained anew
    explained = fresh.explain(resolve_explainer("attention"), cache=False)
    found, _ = links_read(fresh, explained.scores, "argmax", None)
    return [{"id": k, "links": sorted(map(list, v))} for k, v in found.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True, help="folder for each layer's links files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-limit", type=int, help="training pairs (default: the task's)")
    parser.add_argument("--epochs", type=int, help="most epochs (default: the family's)")
    parser.add_argument("--layers", type=int, help="encoder and decoder layers (default 3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    base = RunConfig(tasks=("alignment",), data_dir=args.data_dir, seeds=(args.seed,),
                     model="transformer", train_limit=args.train_limit, epochs=args.epochs,
                     model_layers=args.layers, progress=False, allow_weak_model=True)
    rows, layers = [], None
    for split in ("validation", "test"):
        config = replace(base, split=split)
        session = open_session("alignment", config)
        model = session.prepared.model
        layers = layers or model.config.layers
        for layer in range(layers):
            path = out / f"layer{layer}.{split}.jsonl"
            write_jsonl_atomic(path, layer_links(session, layer))
            aer = next(r for r in score_alignments("alignment", str(path), config)
                       if r["metric"].startswith("aer"))
            rows.append((layer, split, aer))
    best = min((r for r in rows if r[1] == "validation"), key=lambda r: r[2]["mean"])[0]
    table = [[layer, *(f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                       for lay, _, r in rows if lay == layer),
              "chosen" if layer == best else ""] for layer in range(layers or 0)]
    print(tabulate(table, headers=["decoder layer", "validation AER", "test AER", ""],
                   tablefmt="github"))


if __name__ == "__main__":
    main()
