"""``faithbench validate``: the plugin checks, on the synthetic task's model, in a
fresh worker under the budget and confinement a run uses."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "validate"
HELP = "run the plugin checks on the synthetic task (BiLSTM or Transformer)"
EPILOG = """examples:
  faithbench validate submissions/TEMPLATE.py
  faithbench validate my_package.my_explainer      # module with an EXPLAINER object
  faithbench validate my_entry_point               # entry point in group faithbench.explainers
  faithbench validate my_explainer.py --model transformer --layers 2   # on a (small) MiniLM"""

def add_arguments(p) -> None:
    p.add_argument("submission", help="file path, module name or entry point")
    g = p.add_argument_group("model")
    g.add_argument("--model", choices=("bilstm", "transformer", "decoder"),
                   help="the synthetic task's model family: bilstm (default), transformer "
                   "(all-MiniLM-L6-v2 fine-tuned on it: subword pieces, per-layer attention) "
                   "or decoder (a small Llama-layout decoder trained on it: attention of the "
                   "last position, AttnLRP)")
    g.add_argument("--layers", type=int, help="transformer: keep only the first N encoder "
                   "layers; decoder: N layers (faster; the checks do not need a good model); "
                   "default: all")
    g.add_argument("--epochs", type=int, help="override the synthetic task's epochs "
                   "(default: the task's own)")
    options.plugins(p.add_argument_group("explainers"))
    options.progress(p)


def main(args) -> int:
    from faithbench.benchmark.verbs import validate_plugin

    config = options.checked(args)
    output.containment(config)
    return 0 if output.checks(validate_plugin(args.submission, config)) else 1
