"""Does language-model pre-training on the task's own text help the decoder trained
here? The same decoder, data budget and seed with 0, 1 and 2 epochs of next-token
training first; accuracy per split, epochs trained and time. Each model is cached like
any other, so a second run prints the table at once.

    python benchmarks/decoder_pretraining.py --data-dir ../shared/data --train-limit 20000
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate

from faithbench import tasks
from faithbench.benchmark.core.api import TaskOptions
from faithbench.tasks import decoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--task", default="sentiment")
    parser.add_argument("--train-limit", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, nargs="+", default=[0, 1, 2],
                        help="language-model epochs to compare (default 0 1 2)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for epochs in args.epochs:
        decoder.PRETRAIN_EPOCHS = epochs
        start = time.perf_counter()
        ready = tasks.get_task(args.task).prepare(TaskOptions(
            data_dir=args.data_dir, model="decoder", train_limit=args.train_limit,
            seed=args.seed), progress=False)
        rows.append([epochs, *(round(ready.accuracy.get(s, float("nan")), 3)
                               for s in ("validation", "test")),
                     len(ready.history), "cached" if ready.loaded_from_cache
                     else f"{time.perf_counter() - start:.0f} s"])
    print(tabulate(rows, headers=["LM epochs", "validation", "test", "epochs trained",
                                  "time (1 thread)"], tablefmt="github"))


if __name__ == "__main__":
    main()
