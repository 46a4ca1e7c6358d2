"""The ferret half of benchmarks/vs_ferret.py: explanations, faithfulness scores and
timings from ferret-xai 0.4.2 itself, for faithbench to be compared against.

It runs in its own virtualenv (benchmarks/peers-requirements.txt), not in faithbench's
environment: ferret-xai 0.4.2 pins transformers<5, datasets<3, numpy<2 and captum<0.8.

    python benchmarks/ferret_side.py --model-dir DIR --data-dir ../shared/data \\
        --n 200 --out OUTDIR [--threads 1] [--seed 0] [--normalize l1|none]

For the first N rows of DATA_DIR/sst2/validation.jsonl it explains the model's predicted
class with ferret's Gradient, Gradient x Input, LIME and Partition SHAP explainers, scores
every explanation with ferret's AOPC comprehensiveness, AOPC sufficiency and tau-LOO
evaluators (their defaults), and writes, in OUTDIR:
  explanations-<name>.jsonl  {"id", "tokens", "scores", "target"}, [CLS]/[SEP] dropped
  ferret-<name>.jsonl        {"id", "aopc_compr", "aopc_suff", "taucorr_loo"} (NaN -> null)
  timing.json                wall times, forward counts, versions, settings in effect
  ferret-loo.jsonl           {"id", "drops"}: p(x) - p(x without piece i) (--evaluate-only)
Scores are L1-normalised as ferret's Benchmark.explain does by default (over all tokens,
[CLS]/[SEP] included); the explainer classes themselves do not normalise.
LIME and SHAP are seeded with np.random.seed(SEED) right before each sentence's call.
"""

import argparse
import json
import math
import os
import time
from pathlib import Path

NAMES = ["gradient", "gradient_x_input", "lime", "partition_shap"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--evaluate-only", action="store_true",
                   help="re-run only ferret's evaluators on the explanations already in OUT "
                   "(timed into timing-evaluate.json), to time both tools back to back")
    p.add_argument("--normalize", choices=["l1", "none"], default="l1",
                   help="l1: ferret Benchmark.explain's default (normalize_scores=True, order=1)")
    return p.parse_args()


def argsort_probes():
    """Tied arrays of 5 to 64 values (an SST-2 sentence's pieces) for the tie-order check."""
    return [[float((i * 7) % 3) for i in range(n)] for n in (5, 16, 17, 24, 40, 64)]


def nan_to_none(x):
    x = float(x)
    return None if math.isnan(x) else x


def write_jsonl(path, rows):
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def main():
    args = parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    from importlib.metadata import version

    import numpy as np
    import torch
    from ferret import GradientExplainer, LIMEExplainer, SHAPExplainer
    from ferret.benchmark import lp_normalize
    from ferret.evaluators.faithfulness_measures import (
        AOPC_Comprehensiveness_Evaluation,
        AOPC_Sufficiency_Evaluation,
        TauLOO_Evaluation,
    )
    from ferret.model_utils import ModelHelper
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir).eval()

    with open(Path(args.data_dir) / "sst2" / "validation.jsonl") as f:
        rows = [json.loads(line) for _, line in zip(range(args.n), f)]
    ids = [f"validation-{r['idx']}" for r in rows]
    texts = [r["sentence"] for r in rows]
    with torch.no_grad():
        targets = [int(model(**tok(t, return_tensors="pt")).logits.softmax(-1).argmax(-1))
                   for t in texts]

    # Count every row ferret sends through ModelHelper._forward (all evaluator forwards,
    # LIME's and SHAP's too); texts are only logged here, tokenised after the timing.
    log = {"phase": None}
    orig_forward = ModelHelper._forward

    def counted_forward(self, text, *a, **kw):
        if log["phase"] is not None:
            batch = [text] if isinstance(text, str) else [str(t) for t in text]
            log["texts"].append((batch, kw.get("add_special_tokens", True)))
            log["calls"] += math.ceil(len(batch) / kw.get("batch_size", 8))
        return orig_forward(self, text, *a, **kw)

    ModelHelper._forward = counted_forward

    def start(phase):
        log.update(phase=phase, texts=[], calls=0)

    def stop():
        log["phase"] = None
        all_rows = [(tuple(i), s) for batch, s in log["texts"]
                    for i in tok(batch, truncation=True, add_special_tokens=s)["input_ids"]]
        return {"rows": len(all_rows), "distinct": len({r for r, _ in all_rows}),
                "model_calls": log["calls"]}

    explainers = {
        "gradient": GradientExplainer(model, tok, multiply_by_inputs=False),
        "gradient_x_input": GradientExplainer(model, tok, multiply_by_inputs=True),
        "lime": LIMEExplainer(model, tok),
        "partition_shap": SHAPExplainer(model, tok),
    }
    evaluators = {"aopc_compr": AOPC_Comprehensiveness_Evaluation(model, tok),
                  "aopc_suff": AOPC_Sufficiency_Evaluation(model, tok),
                  "taucorr_loo": TauLOO_Evaluation(model, tok)}
    expected_tokens = [tok.convert_ids_to_tokens(tok(t)["input_ids"])[1:-1] for t in texts]

    if args.evaluate_only:
        from ferret.explainers.explanation import Explanation
        timing = {}
        for name in explainers:
            rows = [json.loads(line) for line in
                    (out / f"explanations-{name}.jsonl").read_text().splitlines()]
            expls = [Explanation(text, [tok.cls_token, *r["tokens"], tok.sep_token],
                                 np.array([0.0, *r["scores"], 0.0]), name, r["target"])
                     for text, r in zip(texts, rows)]
            start("evaluate")
            t0 = time.perf_counter()
            results = [{k: ev.compute_evaluation(e, target=e.target).score
                        for k, ev in evaluators.items()} for e in expls]
            timing[name] = {"evaluate_s": time.perf_counter() - t0,
                            "eval_rows_forwarded": stop()["rows"]}
            before = [json.loads(line) for line in
                      (out / f"ferret-{name}.jsonl").read_text().splitlines()]
            for r, b in zip(results, before):  # the same numbers as the first run
                for k, v in r.items():
                    assert (math.isnan(v) and b[k] is None) or abs(v - b[k]) < 1e-6, (name, k)
            print(name, json.dumps(timing[name]), flush=True)
        # ferret's leave-one-out drops themselves (after the timings, not timed): a τ-b
        # that differs between the tools is traced to the drops float32 rounds apart
        loo = evaluators["taucorr_loo"]
        rows = [json.loads(line) for line in
                (out / "explanations-gradient.jsonl").read_text().splitlines()]
        write_jsonl(out / "ferret-loo.jsonl", [
            {"id": i, "drops": [-float(d) for d in
                                loo.compute_leave_one_out_occlusion(text, target=r["target"])]}
            for i, text, r in zip(ids, texts, rows)])
        # ferret ranks by np.argsort, whose order among equal scores depends on numpy's
        # version and the CPU: its answer on tied probes tells faithbench which to use
        timing["argsort_probes"] = [np.argsort(np.array(p, dtype=float)).tolist()
                                    for p in argsort_probes()]
        (out / "timing-evaluate.json").write_text(json.dumps(timing, indent=2) + "\n")
        return

    timing = {}
    for name, explainer in explainers.items():
        start("explain")
        t0 = time.perf_counter()
        expls = []
        for text, target in zip(texts, targets):
            np.random.seed(args.seed)  # LIME samples and SHAP's heap tie-breaks use np.random
            torch.manual_seed(args.seed)
            expls.append(explainer(text, target))
        if args.normalize == "l1":
            expls = lp_normalize(expls, 1)
        explain_s = time.perf_counter() - t0
        explain_counts = stop()

        records = []
        for i, e, want in zip(ids, expls, expected_tokens):
            scores = np.asarray(e.scores).tolist()
            if (e.tokens[1:-1] != want or e.tokens[0] != tok.cls_token
                    or e.tokens[-1] != tok.sep_token or len(scores) != len(e.tokens)):
                raise SystemExit(f"{name} {i}: explanation tokens {e.tokens} (with "
                                 f"{len(scores)} scores) != [CLS] + {want} + [SEP]")
            records.append({"id": i, "tokens": e.tokens[1:-1],
                            "scores": [float(s) for s in scores[1:-1]], "target": e.target})
        write_jsonl(out / f"explanations-{name}.jsonl", records)

        start("evaluate")
        t0 = time.perf_counter()
        results = [{k: ev.compute_evaluation(e, target=e.target).score
                    for k, ev in evaluators.items()} for e in expls]
        evaluate_s = time.perf_counter() - t0
        eval_counts = stop()
        write_jsonl(out / f"ferret-{name}.jsonl",
                    [{"id": i, **{k: nan_to_none(v) for k, v in r.items()}}
                     for i, r in zip(ids, results)])

        timing[name] = {"explain_s": explain_s, "evaluate_s": evaluate_s,
                        "eval_rows_forwarded": eval_counts["rows"],
                        "eval_rows_distinct": eval_counts["distinct"],
                        "eval_model_calls": eval_counts["model_calls"],
                        "explain_rows_forwarded_via_helper": explain_counts["rows"],
                        "explain_rows_distinct_via_helper": explain_counts["distinct"]}
        print(name, json.dumps(timing[name]), flush=True)

    ModelHelper._forward = orig_forward

    # What the evaluators' decode -> re-tokenise step does to this tokenizer's ids.
    def round_trip(text):
        ids_ = tok(text)["input_ids"]
        decoded = tok.decode(ids_[1:-1])
        back = tok(decoded)["input_ids"]
        return {"text": text, "decoded": decoded, "same_ids": back == ids_,
                "tokens": tok.convert_ids_to_tokens(ids_)[1:-1],
                "tokens_after": tok.convert_ids_to_tokens(back)[1:-1]}

    trips = [round_trip(t) for t in texts]
    broken = [t for t in trips if not t["same_ids"]]
    probes = [round_trip(t) for t in ("i do n't like it .", "it ca n't be done .",
                                      "i do not like it .", "it 's good .")]
    # TauLOO's rows: one token deleted, decoded, re-tokenised (word pieces can merge).
    loo_total, loo_broken = 0, []
    for text in texts:
        inner = tok(text)["input_ids"][1:-1]
        for j in range(len(inner)):
            kept = inner[:j] + inner[j + 1:]
            decoded = tok.decode(kept)
            back = tok(decoded)["input_ids"][1:-1]
            loo_total += 1
            if back != kept:
                loo_broken.append({"text": text, "deleted": tok.convert_ids_to_tokens(inner[j]),
                                   "decoded": decoded,
                                   "tokens_kept": tok.convert_ids_to_tokens(kept),
                                   "tokens_after": tok.convert_ids_to_tokens(back)})

    timing.update({
        "n": len(texts), "threads": args.threads, "seed": args.seed,
        "model_dir": str(args.model_dir),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "versions": {p: version(p) for p in ("ferret-xai", "transformers", "torch", "numpy",
                                             "captum", "shap", "lime", "scipy", "tokenizers")},
        "normalization": ("L1 over all tokens incl. [CLS]/[SEP] (ferret.benchmark.lp_normalize"
                          ", = Benchmark.explain default normalize_scores=True, order=1)"
                          if args.normalize == "l1" else "none (raw explainer scores)"),
        "seeding": "np.random.seed(seed) and torch.manual_seed(seed) before every "
                   "explainer call; ferret's SHAP seed=42 goes to shap.Explainer, which "
                   "uses it only for the permutation algorithm",
        "decode": {"tokenizer_class": type(tok).__name__,
                   "clean_up_tokenization_spaces": tok.clean_up_tokenization_spaces,
                   "backend_decoder": (json.loads(tok.backend_tokenizer.to_str())["decoder"]
                                       if hasattr(tok, "backend_tokenizer") else None),
                   "n_sentences_not_round_tripping": len(broken),
                   "examples": broken[:2], "probes": probes,
                   "probe_if_clean_up_true": tok.decode(tok("i do n't like it .")["input_ids"][1:-1],
                                                        clean_up_tokenization_spaces=True),
                   "loo_rows": loo_total, "loo_rows_not_round_tripping": len(loo_broken),
                   "loo_examples": loo_broken[:3]},
    })
    (out / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")


if __name__ == "__main__":
    main()
