"""Generation attribution, scored: one row per teacher-forced token of a causal LM's
continuation, metrics on the target's log-probability computed here against the
library's own forward on the typed tokens, a sequence's value the mean of its steps,
greedy continuations against the library's ``generate``, explain → score round trips,
and the data errors. Tiny Llama and GPT-2 checkpoints are built here (no download);
the GPT-2 one gets a byte-level BPE tokenizer trained here, which has no leading
special token (its end-of-text token starts a text)."""

import json
import math
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.core.errors import DataFileError, InputError

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

ROWS = [("the movie was", " good and funny"), ("a dull and boring", " film"),
        ("it is not a bad", " film at all")]


@pytest.fixture(scope="module")
def wordpiece():
    from faithbench.tasks.transformer import base_path, load_tokenizer
    return load_tokenizer(base_path())


@pytest.fixture(scope="module")
def bytelevel():
    """A byte-level BPE tokenizer (GPT-2's kind) trained on a few sentences here."""
    from tokenizers import ByteLevelBPETokenizer
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([p + c for p, c in ROWS] * 20, vocab_size=300,
                            special_tokens=["<|endoftext|>"])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe,
                                                eos_token="<|endoftext|>")


def checkpoint(path, layout, tokenizer):
    torch.manual_seed(0)
    if layout == "gpt2":
        config = transformers.GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=2,
                                         n_head=2, n_positions=64,
                                         eos_token_id=tokenizer.eos_token_id,
                                         bos_token_id=tokenizer.eos_token_id)
    else:
        config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=16,
                                          intermediate_size=32, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=64)
    hf = transformers.AutoModelForCausalLM.from_config(config)
    hf.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return hf.eval()


def data_file(path, rows=ROWS, continuation=True):
    with open(path, "w") as f:
        f.writelines(json.dumps({"id": f"s{i}", "prompt": p,
                                **({"answer": c} if continuation else {})}) + "\n" for i, (p, c) in enumerate(rows))
    return str(path)


def options(tmp_path, model, data, **dataset):
    from faithbench.benchmark.core.api import DatasetOptions, TaskOptions
    own = DatasetOptions(source=data, text="prompt", **dataset)
    return TaskOptions(model_path=str(model), dataset=own)


@pytest.fixture(scope="module")
def llama(tmp_path_factory, wordpiece):
    root = tmp_path_factory.mktemp("llama")
    hf = checkpoint(root / "model", "llama", wordpiece)
    return root, hf


def prepared(root, **dataset):
    from faithbench.tasks.generation import TASK
    data = data_file(root / "d.jsonl", continuation="continuation" in dataset)
    return TASK.prepare(options(root, root / "model", data, **dataset))


def test_a_row_per_continuation_token_reads_the_prompt_and_earlier_tokens(llama, wordpiece):
    root, _ = llama
    ready = prepared(root, continuation="answer")
    rows = ready.examples("test")
    assert [e.id for e in rows[:4]] == ["s0-0", "s0-1", "s0-2", "s1-0"]
    assert rows[0].tokens == ("the", "movie", "was")  # no [CLS]: a constant of the model
    assert rows[2].tokens == ("the", "movie", "was", "good", "and")
    assert wordpiece.convert_ids_to_tokens(rows[2].label) == "funny"
    assert {ready.group_of(e) for e in rows} == {"s0", "s1", "s2"}
    assert ready.spec.id.startswith("generation[continuation=answer;data=")


@torch.no_grad()
def test_comprehensiveness_is_the_log_probability_drop_of_each_step_averaged_per_sequence(
        llama, wordpiece):
    """Scores rank each row's tokens right to left; comprehensiveness at one bin of 40 %
    erases the ceil(0.4 n) last tokens. The expected value is computed with the library
    model on the typed ids: log p(target | [CLS] + tokens) − log p(target | the kept)."""
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.session import EvaluationSession
    from faithbench.metrics import resolve
    root, hf = llama
    ready = prepared(root, continuation="answer")
    session = EvaluationSession(ready, RunConfig(tasks=("generation",), progress=False,
                                                allow_weak_model=True), seed=0)
    rows = session.examples
    metric = resolve("comprehensiveness[bins=0.4]")
    scored = session.score(metric, [list(range(len(e.tokens))) for e in rows])
    cls = wordpiece.cls_token_id

    def logp(tokens, target):
        ids = torch.tensor([[cls, *wordpiece.convert_tokens_to_ids(list(tokens))]])
        return float(torch.log_softmax(hf(ids).logits[0, -1].double(), -1)[target])

    expected = {}
    for e in rows:
        k = math.ceil(0.4 * len(e.tokens))
        drop = logp(e.tokens, e.label) - logp(e.tokens[:-k], e.label)
        expected.setdefault(e.extras["sequence"], []).append(drop)
    assert scored.ids == ["s0", "s1", "s2"]
    for sid, value in zip(scored.ids, scored.values):
        assert value == pytest.approx(sum(expected[sid]) / len(expected[sid]), abs=1e-5)


@torch.no_grad()
def test_a_greedy_continuation_is_the_librarys_generate_on_the_typed_prompt(tmp_path, bytelevel):
    """GPT-2 layout with a byte-level tokenizer: no leading special token, so the end of
    text token starts each text, as GPT-2 starts one."""
    from faithbench.tasks.generation import TASK
    hf = checkpoint(tmp_path / "model", "gpt2", bytelevel)
    data = data_file(tmp_path / "d.jsonl", continuation=False)
    ready = TASK.prepare(options(tmp_path, tmp_path / "model", data, generate=5))
    eos = bytelevel.eos_token_id
    for seq, (prompt, _) in zip(ready.sequences["test"], ROWS):
        ids = torch.tensor([[eos, *bytelevel(prompt)["input_ids"]]])
        out = hf.generate(ids, max_new_tokens=5, do_sample=False, eos_token_id=eos,
                          pad_token_id=eos)[0, ids.shape[1]:].tolist()
        if eos in out:
            out = out[: out.index(eos) + 1]
        assert list(bytelevel.convert_tokens_to_ids(list(seq.continuation))) == out
    assert ready.spec.id.startswith("generation[data=") and "generate=5" in ready.spec.id


def test_prompt_and_continuation_are_tokenized_as_the_model_reads_them(tmp_path, bytelevel):
    from faithbench.tasks.generation import TASK
    checkpoint(tmp_path / "model", "gpt2", bytelevel)
    data = data_file(tmp_path / "d.jsonl")
    ready = TASK.prepare(options(tmp_path, tmp_path / "model", data, continuation="answer"))
    for seq, (prompt, more) in zip(ready.sequences["test"], ROWS):
        assert seq.prompt + seq.continuation == tuple(bytelevel.tokenize(prompt + more))
        assert seq.continuation[0].startswith("Ġ")  # the space is the continuation's


def test_explain_then_score_gives_the_runs_values(tmp_path, llama):
    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import run
    from faithbench.benchmark.verbs import explain_to_file, score_file
    root, _ = llama
    data = data_file(tmp_path / "d.jsonl")
    common = {"tasks": ("generation",), "model_path": str(root / "model"), "progress": False,
              "allow_weak_model": True,  # random weights
              "dataset": options(tmp_path, root / "model", data, continuation="answer").dataset}
    summary = run(RunConfig(**common, explainers=("gradient_x_input",),
                            metrics=("comprehensiveness", "aopc_morf"),
                            out=str(tmp_path / "out"), write_leaderboard=False))
    assert summary.exit_code == 0, summary.failures
    explain_to_file("generation", "gradient_x_input", str(tmp_path / "gx.jsonl"),
                    RunConfig(**common))
    written = read_jsonl(tmp_path / "gx.jsonl")
    assert {"sequence", "step", "target_token", "prompt_length"} <= set(written[0])
    # no dataset: the rows alone, with the model
    rows = score_file("generation", str(tmp_path / "gx.jsonl"),
                      RunConfig(tasks=("generation",), model_path=str(root / "model"),
                                progress=False, metrics=("comprehensiveness", "aopc_morf")))
    ran = {r.metric.split("[")[0]: r.estimate.mean for r in summary.results}
    assert {r["metric"].split("[")[0]: r["n"] for r in rows} == {"comprehensiveness": 3,
                                                                 "aopc_morf": 3}
    for r in rows:
        assert r["mean"] == pytest.approx(ran[r["metric"].split("[")[0]], abs=1e-9)


def test_bad_data_is_named(tmp_path, llama):
    from faithbench.tasks.generation import TASK
    root, _ = llama
    model = root / "model"

    def refused(rows, match, **dataset):
        path = tmp_path / "bad.jsonl"
        with open(path, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        with pytest.raises(InputError, match=match):
            TASK.prepare(options(tmp_path, model, str(path), **dataset))

    refused([{"prompt": "a b"}], "no column 'answer'", continuation="answer")
    refused([{"prompt": " ", "answer": "x"}], "row 1, column 'prompt': an empty prompt",
            continuation="answer")
    refused([{"id": 1, "prompt": "a", "answer": "b"}, {"id": 1, "prompt": "c", "answer": "d"}],
            "row 2, column 'id': id '1' also on row 1", continuation="answer")
    refused([{"prompt": "word " * 70, "answer": "x"}], "more than the 63 the model reads",
            continuation="answer")
    with pytest.raises(InputError, match="give --model-path"):
        TASK.prepare(options(tmp_path, model, "x").__class__())


def test_rows_from_a_file_must_be_the_models_tokens(llama, tmp_path):
    root, _ = llama
    ready = prepared(root, continuation="answer")
    with pytest.raises(DataFileError, match="line 2.*'zzzqqq' is not a token"):
        ready.examples_from_rows("f.jsonl", [
            {"id": "a", "tokens": ["the"], "target_token": "movie"},
            {"id": "b", "tokens": ["zzzqqq"], "target_token": "movie"}])


# -- Inseq's saved attributions ------------------------------------------------------------

INSEQ = Path(__file__).parent / "fixtures" / "inseq"  # written by benchmarks/inseq_fixture.py


@pytest.fixture(scope="module")
def inseq_model():
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.tasks.generation import TASK
    return TASK.prepare(TaskOptions(model_path=str(INSEQ / "model")))


def inseq_rows(ready, *names):
    from faithbench.benchmark.inseq import read_inseq
    return [row for name in names
            for row in read_inseq(INSEQ / name, ready.tokenizer, ready.n_outputs)]


def test_inseq_rows_are_its_tokens_and_its_scores_norm_over_the_hidden_units(inseq_model):
    """Column j of Inseq's target attributions scores the tokens before position
    attr_pos_start + j; the leading <|endoftext|> is the model's start token, not a
    feature; a granular score is the L2 norm over the hidden units (Inseq's vnorm)."""
    expected = json.loads((INSEQ / "expected.json").read_text())
    rows = inseq_rows(inseq_model, "granular.json")
    at = 0
    for k, seq in enumerate(expected):
        ids = [i for _, i in seq["target"]]
        for j in range(len(ids) - seq["start"]):
            row, pos = rows[at], seq["start"] + j
            assert row["id"] == f"granular-{k}-{j}" and row["sequence"] == f"granular-{k}"
            assert row["target"] == ids[pos]
            assert inseq_model.tokenizer.convert_tokens_to_ids(row["tokens"]) == ids[1:pos]
            assert row["scores"] == pytest.approx([r[j] for r in seq["vnorm"][1:pos]], rel=1e-6)
            at += 1
    assert at == len(rows) == 5  # 4 steps of the first sequence, 1 of the second


def test_every_inseq_format_gives_the_same_rows(inseq_model):
    base = inseq_rows(inseq_model, "granular.json")
    strip = [{k: v for k, v in r.items() if k not in ("id", "sequence")} for r in base]

    def same(rows, rel):
        assert len(rows) == len(base)
        for r, b in zip(rows, strip):
            assert {k: r[k] for k in b if k != "scores"} == {k: b[k] for k in b if k != "scores"}
            assert r["scores"] == pytest.approx(b["scores"], rel=rel)

    same(inseq_rows(inseq_model, "prim.json"), 1e-12)  # use_primitives=True
    same(inseq_rows(inseq_model, "split_0.json", "split_1.json"), 1e-12)  # split_sequences
    # float16, gzipped: scores near 1e-5 lie in float16's subnormal range (steps of 6e-8)
    same(inseq_rows(inseq_model, "granular16.json.gz"), 1e-2)
    # aggregated by Inseq's default (vnorm, then each step normalized to sum 1)
    for r, b in zip(inseq_rows(inseq_model, "aggregated.json"), strip):
        assert r["scores"] == pytest.approx([v / sum(b["scores"]) for v in b["scores"]],
                                            rel=1e-5)


@torch.no_grad()
def test_inseq_rows_are_scored_on_the_forward_inseq_ran(inseq_model):
    """The target's probability in faithbench's forward of each row is the probability
    Inseq recorded at that step (its ``probability`` step score)."""
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.verbs import score_file
    expected = json.loads((INSEQ / "expected.json").read_text())
    rows = inseq_rows(inseq_model, "granular.json")
    examples = inseq_model.examples_from_rows("granular.json", rows)
    batch, labels, _ = next(inseq_model.batches(examples, 64))
    probs = torch.softmax(inseq_model.model.logits(batch).double(), -1)
    got = probs.gather(1, labels.unsqueeze(1)).squeeze(1).tolist()
    assert got == pytest.approx([p for s in expected for p in s["probability"]], rel=1e-5)
    summary = score_file("generation", str(INSEQ / "granular.json"),
                         RunConfig(tasks=("generation",), model_path=str(INSEQ / "model"),
                                   progress=False, metrics=("comprehensiveness",)),
                         inseq=True)
    assert summary[0]["n"] == 2  # two sequences, each the mean of its steps


def test_an_inseq_file_that_does_not_fit_is_named(inseq_model, tmp_path):
    from faithbench.benchmark.inseq import read_inseq
    data = json.loads((INSEQ / "prim.json").read_text())
    data["sequence_attributions"][0]["source_attributions"] = "x"
    (tmp_path / "ed.json").write_text(json.dumps(data))
    with pytest.raises(DataFileError, match="encoder-decoder"):
        read_inseq(tmp_path / "ed.json", inseq_model.tokenizer, inseq_model.n_outputs)
    data["sequence_attributions"][0]["source_attributions"] = None
    data["sequence_attributions"][0]["target"][1]["id"] = 10**6
    (tmp_path / "vocab.json").write_text(json.dumps(data))
    with pytest.raises(DataFileError, match="outside the model's vocabulary"):
        read_inseq(tmp_path / "vocab.json", inseq_model.tokenizer, inseq_model.n_outputs)
    (tmp_path / "not.json").write_text("{\"a\": 1}")
    with pytest.raises(DataFileError, match="not an Inseq attribution file"):
        read_inseq(tmp_path / "not.json", inseq_model.tokenizer, inseq_model.n_outputs)
