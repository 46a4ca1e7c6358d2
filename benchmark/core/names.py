"""The closed lists every layer shares, each kept once: task kinds, metric families
and metric directions. Torch-free, so the leaderboard can read them too."""

# Task kinds: a metric declares the kinds it applies to.
CLASSIFICATION = "classification"
PAIR_CLASSIFICATION = "pair_classification"
ALIGNMENT = "alignment"
# a generated (teacher-forced) token per row: metrics on its log-probability, each
# sequence's steps averaged into one value (``faithbench.tasks.generation``)
GENERATION = "generation"
TASK_KINDS = (CLASSIFICATION, PAIR_CLASSIFICATION, ALIGNMENT, GENERATION)

# Metric families, in the order tables list them; rankings never mix two. "sanity": the
# sanity checks (Adebayo et al. 2018), whether explanations change with the model.
FAMILIES = ("faithfulness", "plausibility", "descriptive", "sanity")

# Which end of a metric is better; "none": a descriptive quantity (e.g. the premise
# share of the top-k), listed high to low, but neither end is better.
DIRECTIONS = ("higher", "lower", "none")
