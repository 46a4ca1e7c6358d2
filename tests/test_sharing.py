"""The engine forwards each distinct variant once and shares it across metrics,
explainers and examples; shared answers equal unshared ones."""

import torch

from faithbench import metrics as metric_registry
from faithbench.benchmark.core.api import Batch, MetricInput
from faithbench.benchmark.core.perturb import Perturber, variant_keys
from faithbench.testing import Votes


class Counting(Votes):
    """The voting model of the metric cards, counting the rows it is given."""

    def __init__(self):
        self.rows = 0

    def logits(self, batch):
        self.rows += len(batch)
        return super().logits(batch)


def _inp(batch, scores, perturber, target=None):
    base = perturber.probs(batch)
    target = base.argmax(dim=1) if target is None else target
    return MetricInput(batch, scores, target, base, perturber)


def test_flip_rate_after_aopc_is_answered_from_memory():
    """x = [2, 2, 3]: aopc_morf (k_max 10) asks for 3 variants (k = 1, 2, 3); flip_rate
    asks for k = 1 again, which costs nothing; comprehensiveness' bins (0.3, 0.5) are
    k = 1 and 2, also AOPC steps."""
    model = Counting()
    batch = Batch(torch.tensor([[2, 2, 3]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
    perturber = Perturber(model)
    inp = _inp(batch, torch.tensor([[0.9, 0.5, 0.1]]), perturber)
    assert (perturber.rows_requested, perturber.rows_forwarded, model.rows) == (1, 1, 1)
    aopc = metric_registry.get_metric("aopc_morf").compute(inp).values
    assert (perturber.rows_requested, perturber.rows_forwarded) == (4, 4)
    flip = metric_registry.get_metric("flip_rate").compute(inp).values
    comp = metric_registry.resolve("comprehensiveness[bins=0.3,0.5]").compute(inp).values
    assert (perturber.rows_requested, perturber.rows_forwarded, model.rows) == (7, 4, 4)
    # the values are the hand-worked ones of the cards
    assert round(aopc.item(), 4) == 0.1556 and flip.item() == 0.0
    assert round(comp.item(), 4) == 0.1833


def test_the_empty_input_is_forwarded_once_for_every_example_and_explainer():
    """flip_fraction removes every token in the end; under ``delete`` the empty input
    is the same for every row, so 2 rows x 2 explainers ask for it 4 times, once sent."""
    ids = torch.tensor([[2, 3, 3], [2, 2, 3]])
    batch = Batch(ids, torch.ones(2, 3, dtype=torch.bool), ("a", "b"))
    perturber = Perturber(Counting())
    metric = metric_registry.get_metric("flip_fraction")
    first = _inp(batch, torch.tensor([[0.3, 0.2, 0.1], [0.3, 0.2, 0.1]]), perturber)
    metric.compute(first)
    # a: [3, 3], [3], []; b: [2, 3], [3], []: 6 asked, 4 distinct ([3] and the empty
    # input are shared across the rows); plus the 2 base rows
    asked_once, sent_once = perturber.rows_requested, perturber.rows_forwarded
    assert (asked_once, sent_once) == (2 + 6, 2 + 4)
    # a second explainer with the reverse order: only its new variants are forwarded
    second = _inp(batch, torch.tensor([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]]), perturber)
    metric.compute(second)
    # a reversed: [2, 3] (b's before), [2] new, []; b reversed: [2, 2] new, [2], []
    assert perturber.rows_requested - asked_once == 2 + 6
    assert perturber.rows_forwarded - sent_once == 2


def test_shared_values_equal_unshared_on_a_trained_model(synthetic_ready, one_thread):
    """Every faithfulness metric x two explainers whose top tokens partly coincide:
    the same per-example values with the memory as without it, for fewer rows."""
    examples = synthetic_ready.examples("test", 32)
    batch, _, _ = synthetic_ready.collate(examples)
    torch.manual_seed(0)
    noise = torch.rand(batch.ids.shape)
    scores_a = noise.clone()
    scores_b = noise.clone()
    scores_b[::2] = torch.rand(scores_b[::2].shape)  # half the rows differ
    names = ["aopc_morf", "aopc_lerf", "comprehensiveness", "sufficiency", "flip_rate",
             "flip_fraction"]
    results = {}
    for share in (False, True):
        perturber = Perturber(synthetic_ready.model, share=share, chunk_size=64)
        base = perturber.probs(batch)
        out = []
        for scores in (scores_a, scores_b):
            inp = MetricInput(batch, scores, base.argmax(1), base, perturber)
            out += [metric_registry.get_metric(n).compute(inp).values for n in names]
        results[share] = (out, perturber.rows_requested, perturber.rows_forwarded)
    (plain, asked, sent), (shared, asked2, sent2) = results[False], results[True]
    assert asked == sent == asked2  # without sharing every request is a forward
    assert sent2 < 0.75 * asked2
    for x, y in zip(plain, shared):
        assert torch.allclose(x, y, atol=1e-6, rtol=0)  # float32 batches of other sizes


def test_keys_name_what_the_model_sees():
    ids = torch.tensor([[4, 5, 0, 0], [4, 5, 6, 0]])
    mask = ids > 0
    one = Batch(ids, mask, ("a", "b"))
    wider = Batch(torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1),
                  torch.cat([mask, torch.zeros(2, 3, dtype=torch.bool)], 1), ("c", "d"))
    assert variant_keys(one) == variant_keys(wider)  # padding and example id do not count
    assert variant_keys(one)[0] != variant_keys(one)[1]
    seg = one.replace(segments=torch.tensor([[0, 1, 0, 0], [0, 0, 1, 0]]))
    other = one.replace(segments=torch.tensor([[0, 0, 0, 0], [0, 0, 1, 0]]))
    assert variant_keys(seg)[0] != variant_keys(other)[0]  # premise/hypothesis split counts
    assert variant_keys(seg)[1] == variant_keys(other)[1]
    # the pad eraser keeps the position (pad id under the mask), unlike deletion
    padded = Batch(torch.tensor([[4, 0, 0]]), torch.tensor([[True, True, False]]), ("e",))
    deleted = Batch(torch.tensor([[4, 0, 0]]), torch.tensor([[True, False, False]]), ("f",))
    assert variant_keys(padded) != variant_keys(deleted)
    prefixed = one.replace(prefix=torch.tensor([[7, 0], [7, 8]]),
                           prefix_mask=torch.tensor([[True, False], [True, True]]))
    assert len(set(variant_keys(prefixed) + variant_keys(one))) == 4


def test_a_full_memory_is_emptied_and_answers_stay_right():
    batch = Batch(torch.tensor([[2, 2, 3, 3, 2]]), torch.ones(1, 5, dtype=torch.bool), ("a",))
    small = Perturber(Counting(), max_cached=3)
    plain = Perturber(Counting(), share=False)
    metric = metric_registry.get_metric("aopc_morf")
    scores = torch.tensor([[0.5, 0.4, 0.3, 0.2, 0.1]])
    for p in (small, plain):
        inp = _inp(batch, scores, p)
        p.last = metric.compute(inp).values
        metric.compute(inp)  # again: the memory was emptied, so this forwards again
    assert torch.equal(small.last, plain.last)
    assert small.rows_forwarded > 1 + 5  # more than once through, since it did not fit


class Wide(Counting):
    """The voting model with 1,000 outputs (most never likely), like a translation
    model's vocabulary: what the memory stores per row is 1,000 probabilities."""

    def logits(self, batch):
        votes = super().logits(batch)
        return torch.cat([votes, torch.full((len(batch), 998), -30.0)], dim=1)


def test_the_memory_bound_counts_stored_probabilities_not_rows():
    """With 1,000 outputs per row and room for 10,000 values, at most 10 rows are kept
    (the 4M-row bound alone let an 8,000-word vocabulary ask for 33 GB); the answers
    still equal unshared ones."""
    ids = torch.tensor([[2, 2, 3, 3, 2, 3, 2], [3, 3, 2, 2, 3, 2, 3]])
    batch = Batch(ids, torch.ones(2, 7, dtype=torch.bool), ("a", "b"))
    scores = torch.rand(2, 7, generator=torch.Generator().manual_seed(0))
    small = Perturber(Wide(), max_cached_values=10_000)
    plain = Perturber(Wide(), share=False)
    metric = metric_registry.get_metric("aopc_morf")
    sizes = []
    for _ in range(3):
        got = metric.compute(_inp(batch, scores, small)).values
        sizes.append(small._store.shape[0])
    want = metric.compute(_inp(batch, scores, plain)).values
    assert torch.allclose(got, want)
    assert max(sizes) <= 14  # 10 rows, or one request's own rows (2 base, 7 x 2 variants)
    assert small._row_budget() == 10
