"""Speed of the metrics on the Transformer family next to MiniLM's own batched forward.

Run: ``python -m pytest benchmarks/test_transformer_speed.py --benchmark-columns=mean``
(needs ../shared/data or FAITHBENCH_DATA). The model is all-MiniLM-L6-v2 with an
untrained head (speed does not depend on the weights), on the first 64 SST-2
validation sentences cut into pieces. Each benchmark records in ``extra_info`` the
rows it forwarded, its rows/s, the model's best plain-forward rows/s over chunk sizes
8..256 (``forward_rows_per_s``), and ``cost_vs_forward`` = metric time / the time
those rows take at that best rate (1.0: the metric costs exactly its forward passes).
"""

import os
import time
from pathlib import Path

import pytest
import torch

from faithbench import metrics as metric_registry
from faithbench.benchmark.core.api import MetricInput, TaskOptions
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.vocab import collate

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
DATA = os.environ.get("FAITHBENCH_DATA") or (str(SHARED_DATA) if SHARED_DATA.is_dir() else None)
N = 64
METRICS = ("aopc_morf", "comprehensiveness", "sufficiency", "flip_fraction", "taucorr_loo",
           "comprehensiveness[preset=ferret]", "sufficiency[preset=ferret]",
           "taucorr_loo[preset=ferret]")


@pytest.fixture(scope="module")
def setup():
    if DATA is None:
        pytest.skip("needs SST-2: set FAITHBENCH_DATA or put ../shared/data beside the repo")
    from faithbench.submissions import get_explainer
    from faithbench.tasks import sentiment
    from faithbench.tasks.transformer import (
        TransformerConfig,
        base_path,
        build_finetune,
        load_tokenizer,
        split_to_pieces,
    )
    torch.set_num_threads(1)
    tokenizer = load_tokenizer(base_path())
    rows = sentiment.read(TaskOptions(data_dir=DATA, variant="sentences"))["validation"][:N]
    examples = split_to_pieces(tokenizer, rows, 510)
    torch.manual_seed(0)
    model = build_finetune(TransformerConfig("all-MiniLM-L6-v2", "-", 2), base_path(),
                           tokenizer).eval()
    batch = collate([tokenizer.convert_tokens_to_ids(list(e.tokens)) for e in examples],
                    [e.id for e in examples], words=[e.words for e in examples])
    scores = get_explainer("gradient_x_input").explain(model, batch, torch.zeros(N, dtype=torch.long),
                                                       rng=torch.Generator())
    return model, batch, scores


@pytest.fixture(scope="module")
def forward_rows_per_s(setup):
    model, batch, _ = setup
    order = torch.sort(batch.lengths, stable=True).indices
    rows = batch.select(order)
    best = 0.0
    with torch.no_grad():
        for chunk in (8, 16, 32, 64, 256):
            start = time.perf_counter()
            for s in range(0, N, chunk):
                part = rows.select(torch.arange(s, min(s + chunk, N)))
                width = int(part.lengths.max())
                model.logits(part.replace(ids=part.ids[:, :width], mask=part.mask[:, :width],
                                          words=None))
            best = max(best, N / (time.perf_counter() - start))
    return best


@pytest.mark.parametrize("name", METRICS)
def test_metric_rows(benchmark, name, setup, forward_rows_per_s):
    model, batch, scores = setup
    metric = metric_registry.resolve(name)

    def run():
        engine = Perturber(model)
        probs = engine.probs(batch)
        metric.compute(MetricInput(batch, scores, probs.argmax(1), probs, engine))
        return engine

    engine = benchmark.pedantic(run, rounds=1, warmup_rounds=0)
    seconds = benchmark.stats.stats.mean
    forwarded = engine.rows_forwarded
    benchmark.extra_info.update(
        rows_forwarded=forwarded, rows_requested=engine.rows_requested,
        rows_per_s=forwarded / seconds, forward_rows_per_s=forward_rows_per_s,
        cost_vs_forward=seconds / (forwarded / forward_rows_per_s))
