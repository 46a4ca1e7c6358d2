"""``faithbench predict``: class probabilities of the task's model for given tokens."""

from __future__ import annotations

from faithbench.benchmark.cli import options

NAME = "predict"
HELP = "class probabilities of the task's trained model for given tokens"
EPILOG = """examples:
  echo '{"id": "x", "tokens": ["a", "great", "film"]}' > in.jsonl
  faithbench predict --task synthetic --input in.jsonl"""

def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="the task (`faithbench list` shows them); "
                   "required")
    p.add_argument("--input", required=True, help='.jsonl of {"id", "tokens"} (and '
                   '"segments" for a pair task); required')
    options.data(p)
    options.model(p)
    options.engine(p)
    options.progress(p)


def main(args) -> int:
    import json

    from faithbench.benchmark.verbs import predict

    config = options.checked(args)
    for row in predict(args.task, args.input, config):
        print(json.dumps(row))
    return 0
