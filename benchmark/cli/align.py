"""``faithbench align``: word alignments read off an explainer (or a reference
aligner), one line per sentence pair."""

from __future__ import annotations

from faithbench.benchmark.cli import options

NAME = "align"
HELP = "word alignments read off an explainer, one line per sentence pair"
EPILOG = """examples:
  faithbench align --task alignment --data-dir ../shared/data --explainer attention --out A.jsonl
  faithbench align --task alignment --data-dir ../shared/data --explainer gradient \\
      --links threshold --fraction 0.5 --out A.jsonl
  faithbench align --task alignment --data-dir ../shared/data --explainer attention \\
      --symmetrize grow-diag-final --out A.jsonl    # also explains alignment_reverse's model
  faithbench align --task alignment --data-dir ../shared/data --aligner eflomal --out E.jsonl
  # A.jsonl -> Pharaoh "i-j" lines (i source, j target, 0-based), and back (line k = id k+1):
  python -c "import json,sys; [print(' '.join(f'{i}-{j}' for i, j in json.loads(l)['links']))
                for l in sys.stdin]" < A.jsonl > A.txt
  python -c "import json,sys; [print(json.dumps({'id': str(k + 1), 'links': [list(map(int,
                x.split('-'))) for x in l.split()]})) for k, l in enumerate(sys.stdin)]" \\
      < A.txt > A.jsonl"""

def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="alignment or alignment_reverse; required")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--explainer", help="the explainer whose scores give the links "
                        "(this or --aligner is required)")
    source.add_argument("--aligner", choices=["diagonal", "eflomal"],
                        help="a reference aligner instead: the diagonal baseline, or eflomal "
                        "on the task's parallel corpus (grow-diag-final of both directions); "
                        "this or --explainer is required")
    p.add_argument("--links", choices=["argmax", "threshold"], default="argmax",
                   help="argmax: one link per target word; threshold: every source word "
                   "scoring at least FRACTION of the row's maximum (default argmax)")
    p.add_argument("--fraction", type=float, default=None, help="with --links threshold: the "
                   "share of the row's maximum a source word must reach (required there)")
    p.add_argument("--symmetrize", choices=["intersect", "grow-diag-final"],
                   help="also explain the other direction's model (alignment <-> "
                   "alignment_reverse) and combine the two link sets (default: one direction)")
    p.add_argument("--from-run", help="reuse the explanations a `faithbench run --out DIR` "
                   "cached (both directions, with --symmetrize); default: explain here")
    p.add_argument("--out", required=True, help="the links file to write (.jsonl); required")
    options.data(p, own=False)
    options.model(p)
    options.examples(p, sample=False)
    options.explainers(p)
    options.engine(p)
    options.progress(p)


def main(args) -> int:
    from faithbench.benchmark.alignments import align_to_file

    config = options.checked(args)
    n = align_to_file(args.task, args.explainer, args.out, config, links=args.links,
                      fraction=args.fraction, aligner=args.aligner, combine=args.symmetrize,
                      from_run=args.from_run)
    print(f"wrote alignments of {n} sentence pairs to {args.out}")
    return 0
