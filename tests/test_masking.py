"""ROAR's masking transforms on hand-worked examples: how many tokens, which ones,
ties, the float pitfall of floor(k · n), keys, and the random baseline's determinism."""

import pytest

from faithbench.benchmark.core.api import DataTransform, Example
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.vocab import UNK
from faithbench.metrics.masking import (
    KEPT,
    MaskPattern,
    RandomMask,
    RecursiveMask,
    TopKMask,
    mask_count,
    top_positions,
)

A = Example("a", ("the", "film", "is", "great", "fun"), 1)
B = Example("b", ("dull",), 0)
SCORES = {"a": [0.1, 0.9, -2.0, 0.9, 0.3], "b": [5.0]}


def test_counts_are_floor_of_ratio_times_length_exactly():
    assert [mask_count(k, 10) for k in (0.1, 0.3, 0.5, 0.7, 0.9)] == [1, 3, 5, 7, 9]
    assert mask_count(0.29, 100) == 29  # float: 0.29 * 100 = 28.999999999999996
    assert mask_count(0.57, 100) == 57  # float: 56.99999999999999
    assert mask_count(0.3, 3) == 0 and mask_count(1.0, 4) == 4
    with pytest.raises(InputError, match=r"in \[0, 1\]"):
        mask_count(1.5, 4)


def test_top_k_masks_the_highest_scores_ties_to_the_earlier_position():
    # ratio 0.5 of 5 tokens: 2; "film" and "great" tie at 0.9 and both go
    assert top_positions(SCORES["a"], 0.5) == [1, 3]
    # ratio 0.3: 1 token; of the tie, the earlier position ("film")
    assert top_positions(SCORES["a"], 0.3) == [1]
    # ratio 0.7: 3 tokens; the negative "is" is never among the top three
    assert top_positions(SCORES["a"], 0.7) == [1, 3, 4]
    t = TopKMask(SCORES, 0.5, "gradient@1")
    assert isinstance(t, DataTransform)
    a, b = t.apply("train", [A, B])
    assert a.tokens == ("the", UNK, "is", UNK, "fun") and a.label == 1
    assert b.tokens == ("dull",)  # floor(0.5 * 1) = 0: a one-word example keeps its word


def test_the_key_names_everything_that_decides_the_output():
    base = TopKMask(SCORES, 0.5, "gradient@1")
    assert base.key == TopKMask(dict(SCORES), 0.5, "gradient@1").key
    assert base.key != TopKMask(SCORES, 0.3, "gradient@1").key
    assert base.key != TopKMask({**SCORES, "b": [4.0]}, 0.5, "gradient@1").key
    assert base.key != TopKMask(SCORES, 0.5, "occlusion@1").key
    assert base.key != RandomMask(0.5).key != RandomMask(0.5, seed=1).key


def test_an_example_without_matching_scores_is_named():
    with pytest.raises(InputError, match=r"example 'b' has 1 tokens but none \(split validation\)"):
        TopKMask({"a": SCORES["a"]}, 0.5, "gradient@1").apply("validation", [A, B])
    with pytest.raises(InputError, match=r"example 'a' has 5 tokens but 2 scores"):
        TopKMask({"a": [0.1, 0.2], "b": [1.0]}, 0.5, "gradient@1").apply("train", [A])


def test_random_masking_is_exact_in_count_and_the_same_for_the_same_example():
    long = [Example(f"x{i}", tuple(f"w{j}" for j in range(20)), 0) for i in range(50)]
    t = RandomMask(0.3, seed=7)
    first = t.apply("train", long)
    assert all(sum(tok == UNK for tok in e.tokens) == 6 for e in first)
    assert t.apply("test", list(reversed(long)))[::-1] == first  # order and split do not matter
    other = RandomMask(0.3, seed=8).apply("train", long)
    assert any(x.tokens != y.tokens for x, y in zip(first, other))
    # positions spread over the sentence: every position is masked somewhere
    hit = {i for e in first for i, tok in enumerate(e.tokens) if tok == UNK}
    assert hit == set(range(20))


def test_recursive_step_keeps_the_previous_positions_and_adds_the_top_of_the_rest():
    first = RecursiveMask(None, SCORES, 0.3, "g@1")  # 1 of 5: "film" (0.9, earlier of the tie)
    assert first.positions(A) == [1] == TopKMask(SCORES, 0.3, "g@1").positions(A)
    # the retrained model's new scores of the masked input: position 1 now scores highest,
    # but it is already masked; floor(0.6 * 5) = 3 in all, so the top 2 of the rest: 4, then 0
    again = {"a": [0.5, 9.0, -1.0, 0.2, 0.7], "b": [1.0]}
    second = RecursiveMask(first, again, 0.6, "g@1")
    assert second.positions(A) == [0, 1, 4]
    assert second.apply("train", [A])[0].tokens == (UNK, UNK, "is", "great", UNK)
    assert second.key != RecursiveMask(None, again, 0.6, "g@1").key  # the chain is in the key
    with pytest.raises(InputError, match="ratios must increase"):
        RecursiveMask(second, again, 0.2, "g@1").positions(A)


def test_mask_pattern_keeps_where_the_mask_fell_and_no_word():
    pattern = MaskPattern(TopKMask(SCORES, 0.5, "g@1"))
    a, b = pattern.apply("test", [A, B])
    assert a.tokens == (KEPT, UNK, KEPT, UNK, KEPT) and a.label == 1
    assert b.tokens == (KEPT,)
    assert pattern.key != TopKMask(SCORES, 0.5, "g@1").key


def test_masked_training_masks_half_the_batch_at_a_uniform_ratio_and_never_padding():
    import torch

    from faithbench.benchmark.core.api import Batch
    from faithbench.benchmark.core.models.training import TrainConfig, random_masking

    rows, width = 20_000, 20
    ids = torch.full((rows, width), 7)
    mask = torch.ones(rows, width, dtype=torch.bool)
    mask[:, 15:] = False  # 5 padding positions per row
    ids[~mask] = 0
    out = random_masking(Batch(ids, mask, tuple(map(str, range(rows)))), 0.5, 1,
                         torch.Generator().manual_seed(0)).ids
    assert (out[:, 15:] == 0).all()  # padding untouched
    share = (out[:, :15] == 1).float().mean(dim=1)  # per row: masked share of real tokens
    chosen = share > 0
    # half the rows are chosen; a chosen row masks none of its 15 tokens with
    # probability E[(1 - r)^15] = 1/16, so 0.5 * 15/16 of the rows show a mask
    assert abs(chosen.float().mean().item() - 0.5 * 15 / 16) < 0.015
    # E[r] = 1/2 for a chosen row, so a quarter of all real tokens are masked
    assert abs((out[:, :15] == 1).float().mean().item() - 0.25) < 0.01
    # off by default, and then absent from the config: earlier models keep their keys
    assert "mask_training" not in TrainConfig().as_dict()
    assert TrainConfig(mask_training=0.5).as_dict()["mask_training"] == 0.5


def test_masked_training_is_an_option_of_the_task_and_of_the_run():
    from faithbench.benchmark.cli import build_parser
    from faithbench.benchmark.cli.options import config as _config
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.tasks.synthetic import TASK

    args = build_parser().parse_args(["run", "--masked-training"])
    options = _config(args).evaluation.task_options(0)
    assert options.masked_training
    plain, masked = TASK.model_file(TaskOptions()), TASK.model_file(options)
    assert plain != masked  # a masked-trained model has its own cache key
    assert TASK.model_file(TaskOptions()) == plain
