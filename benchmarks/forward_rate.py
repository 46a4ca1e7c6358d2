"""The model's own batched-forward throughput, the yardstick every speed benchmark
reports its numbers beside."""

import time

from faithbench.benchmark.core.perturb import Perturber


def best_forward_rows_per_s(model, batches, chunks) -> float:
    """Best rows/s of plain forward passes (sharing off) over ``batches``, across chunk
    sizes: the fastest the engine could answer these rows."""
    best = 0.0
    for chunk in chunks:
        engine = Perturber(model, chunk_size=chunk, share=False)
        start = time.perf_counter()
        for b in batches:
            engine.probs(b)
        best = max(best, engine.rows_forwarded / (time.perf_counter() - start))
    return best
