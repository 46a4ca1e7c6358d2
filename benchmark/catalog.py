"""What is registered: tasks, reference explainers and metrics, with canonical ids."""

from faithbench import metrics as metric_registry
from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark.runner import resolve_explainer


def level(spec) -> str:
    """How a metric's value is formed: mean over examples, corpus aggregate, by
    retraining, or by explaining a randomized model."""
    if spec.needs_training:
        return "retraining"
    if spec.needs_explainer:
        return "re-explaining"
    return "corpus" if spec.aggregation is not None else "per example"


# which capabilities (an explainer's "requires") each model offers; tests/test_catalog.py
# builds each model and checks this table against its ``capabilities``
MODELS = (
    ("bilstm", "the classification tasks' BiLSTM (default; --bilstm orthogonal: no lrp)",
     "attention, attention_gradient, attention_vectors, embeddings, gradients, lrp"),
    ("seq2seq", "alignment's GRU encoder-decoder (default)",
     "attention, attention_gradient, attention_vectors, embeddings, gradients, lrp"),
    ("transformer", "MiniLM (--model transformer), a BERT-layout --model-path",
     ("attention, attention_gradient, attention_vectors, embeddings, gradients, "
      "layer_attention, lrp, value_zeroing")),
    ("decoder", ("--model decoder (classification, alignment), a Llama, Qwen2 or Mistral "
                 "--model-path"),
     "attention, embeddings, gradients, layer_attention, lrp, value_zeroing"),
    ("decoder, GPT-2 layout", "a GPT-2 --model-path",
     "attention, embeddings, gradients, layer_attention"),
    ("transformer encoder-decoder",
     "alignment's --model transformer (attention: its cross-attention)",
     "attention, embeddings, gradients"),
)


def catalog() -> list[tuple[str, list, list[str]]]:
    """(title, rows, headers) for each of tasks, models, explainers, metrics."""
    task_rows = [(t.spec.name, t.spec.kind, t.spec.dataset, t.spec.eval_split, t.spec.id)
                 for _, t in task_registry.REGISTRY.items()]
    explainer_rows = []
    for name in submissions.REFERENCE:
        spec = resolve_explainer(name).spec
        explainer_rows.append((spec.name, ", ".join(sorted(spec.requires)) or "-",
                               spec.cost or "-", spec.id))
    metric_rows = [(m.spec.name, m.spec.family, m.spec.direction, level(m.spec), m.spec.id)
                   for _, m in metric_registry.REGISTRY.items()]
    # the id last: the longest, copied whole, so the columns before it stay in view
    return [
        ("tasks", task_rows, ["name", "kind", "dataset", "eval split", "id"]),
        ("models (what each offers the explainers' \"requires\")", list(MODELS),
         ["name", "what", "offers"]),
        ("explainers", explainer_rows, ["name", "requires", "cost per example", "id"]),
        ("metrics", metric_rows, ["name", "family", "better", "level", "id"]),
    ]
