"""The padded share of explain batches, in split order and bucketed by length (what a
run on an accelerator does, ``faithbench.benchmark.session.bucketed``), on the
evaluation split of SST-2 and SNLI, as words (the BiLSTMs) and as MiniLM pieces.

    python benchmarks/padding.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse

from tabulate import tabulate

from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.session import padded_share
from faithbench.tasks import get_task
from faithbench.tasks.transformer import base_path, load_tokenizer, split_to_pieces


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
    tokenizer = load_tokenizer(base_path())
    rows = []
    for name in ("sentiment", "nli"):
        task = get_task(name)
        # model_path: a reader then skips the training split (only the evaluation one is used)
        splits = task.read(TaskOptions(data_dir=args.data_dir, model_path="-"))
        split = task.spec.split(None)
        for unit, examples in (("words", splits[split]),
                               ("MiniLM pieces", split_to_pieces(tokenizer, splits[split], 510))):
            lengths = [len(e.tokens) for e in examples]
            by_length = sorted(range(len(lengths)), key=lengths.__getitem__)
            rows.append([f"{name} {split}", len(lengths), unit,
                         f"{padded_share(lengths, list(range(len(lengths))), args.batch_size):.1%}",
                         f"{padded_share(lengths, by_length, args.batch_size):.1%}"])
    print(tabulate(rows, ["split", "examples", "tokens", "split order", "bucketed by length"],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
