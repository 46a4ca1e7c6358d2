"""Your own dataset by its columns (tasks ``text`` and ``text_pair``): CSV, Parquet and
JSON Lines with renamed columns, string or integer labels in a stated order, its own
splits or seeded ones, human and planted rationales, and every bad input named by
dataset, split, row and column. The data are the synthetic task's sentences (planted
words decide the label), written out in the user's formats, so a model learns them in
seconds and passes the gate."""

from __future__ import annotations

import csv
import json

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.api import DatasetOptions, TaskOptions
from faithbench.benchmark.core.errors import InputError
from faithbench.leaderboard.entry import read_entries
from faithbench.tasks import get_task
from faithbench.tasks.own_data import read_dataset
from faithbench.tasks.synthetic import generate

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = ["--batch-size", "16", "--no-progress", "--epochs", "3"]
LABELS = ("bad", "good")  # the synthetic labels 0 and 1, as words


def rows(n: int, split: str = "train", seed: int = 0) -> list[dict]:
    """Synthetic sentences as a user's rows: review text, a word label, the planted
    words' indices as the rationale."""
    out = []
    for e in generate(split, n, seed):
        out.append({"review": " ".join(e.tokens), "verdict": LABELS[e.label],
                    "why": [i for i, r in enumerate(e.reference) if r]})
    return out


def write_csv(path, table: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows({**r, **({"why": json.dumps(r["why"])} if "why" in r else {})}
                         for r in table)


def own(path, **columns) -> DatasetOptions:
    return DatasetOptions(source=str(path), **{"text": "review", "label": "verdict", **columns})


def test_a_csv_with_renamed_columns_runs_end_to_end(tmp_path, capsys, caplog):
    data = tmp_path / "reviews.csv"
    write_csv(data, [{k: v for k, v in r.items() if k != "why"} for r in rows(1000)])
    out = tmp_path / "run"
    assert main(["run", "--tasks", "text", "--dataset", str(data), "--text-column", "review",
                 "--label-column", "verdict", "--explainers", "gradient", "random",
                 "--metrics", "comprehensiveness", "--limit", "30", "--out", str(out),
                 *FAST]) == 0
    printed = capsys.readouterr()
    # one file: validation and test drawn from it (seed 0), 10 % each, sizes stated
    assert "train 800, validation 100, test 100" in caplog.text
    assert "\r" not in printed.err  # no progress bar of datasets' in a log
    entries = read_entries(out / "leaderboard")
    [task] = {t for e in entries for t in e.suite}
    assert task.startswith("text[data=") and ";label=verdict;text=review]@1" in task
    assert "passes the model gate" in printed.out
    # the labels in their sorted order; --labels fixes another, and another model
    prepared = get_task("text").concrete(TaskOptions(dataset=own(data)))
    assert prepared.spec.labels == ("bad", "good")
    flipped = get_task("text").concrete(TaskOptions(dataset=own(data, labels=("good", "bad"))))
    assert flipped.spec.labels == ("good", "bad") and flipped.spec.id != prepared.spec.id
    # predict names the data's labels (the planted words decide them: the model learned it)
    rows_in = tmp_path / "in.jsonl"
    rows_in.write_text(json.dumps({"id": "a", "tokens": ["w01", "superb", "w02"]}) + "\n"
                       + json.dumps({"id": "b", "tokens": ["w01", "awful", "w02"]}) + "\n")
    assert main(["predict", "--task", "text", "--dataset", str(data), "--text-column",
                 "review", "--label-column", "verdict", "--input", str(rows_in),
                 "--epochs", "3"]) == 0
    said = [json.loads(line) for line in capsys.readouterr().out.splitlines()
            if line.startswith("{")]
    assert [r["label"] for r in said] == ["good", "bad"]


def test_parquet_with_its_own_splits_and_a_rationale_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder = tmp_path / "parquet"
    folder.mkdir()
    for split, n in (("train", 600), ("validation", 100), ("test", 100)):
        table = rows(n, split)
        pq.write_table(pa.Table.from_pylist(table), folder / f"{split}.parquet")
    data = read_dataset(own(folder, rationale="why"))
    assert data.origin == {"train": "its own", "validation": "its own", "test": "its own"}
    assert {k: len(v) for k, v in data.splits.items()} == {"test": 100, "validation": 100,
                                                           "train": 600}
    first = data.splits["test"][0]
    truth = generate("test", 1, 0)[0]
    assert first.tokens == truth.tokens and first.reference == truth.reference
    assert first.label == truth.label and first.id == "test-0"
    out = tmp_path / "run"
    assert main(["run", "--tasks", "text", "--dataset", str(folder), "--text-column",
                 "review", "--label-column", "verdict", "--rationale-column", "why",
                 "--explainers", "attention", "--metrics", "comprehensiveness", "token_f1",
                 "--limit", "30", "--out", str(out), *FAST]) == 0
    [entry] = read_entries(out / "leaderboard")
    assert {r.metric.split("@")[0].split("[")[0] for r in entry.results} == {
        "comprehensiveness", "token_f1"}
    [task] = entry.suite
    assert ";rationale=why;" in task


def test_a_mask_rationale_and_integer_labels(tmp_path):
    data = tmp_path / "masks.jsonl"
    with open(data, "w") as fh:
        fh.writelines(json.dumps({"tokens": list(e.tokens), "y": e.label,
                                 "mask": [int(r) for r in e.reference]}) + "\n" for e in generate("train", 400, 3))
    found = read_dataset(DatasetOptions(str(data), "tokens", "y", rationale="mask"))
    assert found.labels == ("0", "1")  # integers, sorted as numbers
    e = next(iter(found.splits["train"]))
    assert e.reference is not None and len(e.reference) == len(e.tokens)


def test_a_pair_task_from_csv(tmp_path):
    table = []
    for e in generate("train", 600, 1):
        half = len(e.tokens) // 2
        table.append({"premise": " ".join(e.tokens[:half]), "hypothesis":
                      " ".join(e.tokens[half:]), "gold": e.label})
    data = tmp_path / "pairs.csv"
    write_csv(data, table)
    out = tmp_path / "run"
    assert main(["run", "--tasks", "text_pair", "--dataset", str(data), "--text-column",
                 "premise", "--pair-column", "hypothesis", "--label-column", "gold",
                 "--explainers", "gradient", "--metrics", "comprehensiveness", "--limit", "20",
                 "--out", str(out), "--allow-weak-model", *FAST]) == 0
    [entry] = read_entries(out / "leaderboard")
    [task] = entry.suite
    assert task.startswith("text_pair[") and ";pair=hypothesis;" in task
    pair = read_dataset(DatasetOptions(str(data), "premise", "gold", pair="hypothesis"))
    e = pair.splits["test"][0]
    assert set(e.segments) == {0, 1} and len(e.segments) == len(e.tokens)


def test_two_datasets_never_share_a_suite(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_csv(a, rows(300, seed=0))
    write_csv(b, rows(300, seed=1))
    ids = {get_task("text").concrete(TaskOptions(dataset=own(p))).spec.id for p in (a, b)}
    assert len(ids) == 2


@pytest.mark.parametrize("change, needle", [
    (lambda t: [{k: v for k, v in r.items() if k != "verdict"} for r in t],
     "no column 'verdict'"),
    (lambda t: t[:40] + [{**t[40], "verdict": "meh"}] + t[41:],
     "row 41, column 'verdict': label 'meh' is not one of bad, good (--labels)"),
    (lambda t: t[:7] + [{**t[7], "review": "   "}] + t[8:],
     "row 8, column 'review': empty text"),
    (lambda t: t[:150], "at least 20 are needed"),
    (lambda t: t[:5] + [{**t[5], "why": [99]}] + t[6:],
     "row 6, column 'why': token index 99 is outside the text"),
])
def test_bad_input_names_the_dataset_row_and_column(tmp_path, change, needle):
    data = tmp_path / "bad.csv"
    write_csv(data, change(rows(600)))
    with pytest.raises(InputError) as err:
        read_dataset(own(data, labels=LABELS, rationale="why"))
    assert needle in str(err.value) and str(data) in str(err.value)


def test_a_test_split_that_overlaps_train_is_refused(tmp_path):
    folder = tmp_path / "splits"
    folder.mkdir()
    train, test = rows(300, "train"), rows(50, "test")
    test[12] = train[33]
    for name, table in (("train", train), ("validation", rows(50, "validation")),
                        ("test", test)):
        write_csv(folder / f"{name}.csv", table)
    with pytest.raises(InputError, match="test split row 13 has the same text as train split "
                                         "row 34"):
        read_dataset(own(folder))


def test_the_cli_asks_for_the_columns_and_the_task(tmp_path, capsys):
    data = tmp_path / "d.csv"
    write_csv(data, rows(300))
    out = ["--out", str(tmp_path / "o"), "--no-progress"]
    assert main(["run", "--tasks", "text", "--dataset", str(data), *out]) == 2
    assert "give --text-column and --label-column" in capsys.readouterr().err
    assert main(["run", "--tasks", "text", *out]) == 2
    assert "task text reads your own dataset: give --dataset" in capsys.readouterr().err
    assert main(["run", "--dataset", str(data), "--text-column", "review", "--label-column",
                 "verdict", *out]) == 2
    assert "add --tasks text" in capsys.readouterr().err
    assert main(["run", "--tasks", "text", "--dataset", str(data), "--text-column", "reveiw",
                 "--label-column", "verdict", *out]) == 2
    assert "no column 'reveiw'; did you mean 'review'?" in capsys.readouterr().err


def test_planted_rationales_are_a_ground_truth_meta_eval_accepts(tmp_path, capsys):
    data = tmp_path / "planted.csv"
    write_csv(data, rows(1000))
    common = ["--tasks", "text", "--dataset", str(data), "--text-column", "review",
              "--label-column", "verdict", "--rationale-column", "why", "--explainers",
              "gradient", "--metrics", "comprehensiveness", "--limit", "30", "--out",
              str(tmp_path / "meta"), *FAST]
    assert main(["meta-eval", *common]) == 2
    assert "--rationale-kind planted" in capsys.readouterr().err
    assert main(["meta-eval", *common, "--rationale-kind", "planted"]) == 0
    assert "gradient" in capsys.readouterr().out


def test_a_checkpoint_fine_tuned_on_the_data_must_name_its_labels(tmp_path):
    """``--model-path`` on your own data: a classifier whose labels are the data's (in
    another order) is evaluated with its outputs put in the data's order, and needs no
    train split; one with other labels is refused."""
    transformers = pytest.importorskip("transformers")
    import torch

    from faithbench.tasks.transformer import base_path, load_tokenizer

    tokenizer = load_tokenizer(base_path())

    def save(folder, id2label):
        torch.manual_seed(1)
        config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, num_labels=2,
                                         id2label=id2label,
                                         label2id={v: k for k, v in id2label.items()})
        hf = transformers.BertForSequenceClassification(config).eval()
        hf.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return hf

    data = tmp_path / "reviews.csv"
    write_csv(data, rows(300))
    hf = save(tmp_path / "good", {0: "GOOD", 1: "bad"})
    ready = get_task("text").prepare(TaskOptions(dataset=own(data),
                                                 model_path=str(tmp_path / "good")),
                                     progress=False)
    assert ready.spec.labels == ("bad", "good") and ";model=hf" in ready.spec.id
    assert "train" not in ready.splits
    batch, _, _ = next(ready.batches(ready.examples("test", 3), 3))
    words = [" ".join(e.tokens).replace(" ##", "") for e in ready.examples("test", 3)]
    with torch.no_grad():
        raw = hf(**tokenizer(words, return_tensors="pt", padding=True)).logits
        assert torch.allclose(ready.model.logits(batch), raw[:, [1, 0]], atol=1e-5)
    save(tmp_path / "other", {0: "positive", 1: "negative"})
    with pytest.raises(InputError, match="are not the task's"):
        get_task("text").prepare(TaskOptions(dataset=own(data),
                                             model_path=str(tmp_path / "other")),
                                 progress=False)
