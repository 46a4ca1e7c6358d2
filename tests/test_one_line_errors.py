"""Bad input that used to fail late or with a bare traceback (issue 44, attack 6): each
now stops the run at once, through the CLI, with exit 2 and one line on stderr that
names the file (and line) or path, and nothing computed over the bad input is kept.

(a) an example id twice in a data file; (b) an ``--out`` that cannot be written (a
file, under a file, under /proc, no permission, a full disk); (c) a result line or
per-example row changed in a run folder; (d) a control character in a text; (e) an
example far over the task's length cap.
"""

from __future__ import annotations

import errno
import json
import os
import re
import types
from pathlib import Path

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core import files, records
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.records import read_jsonl, read_results

QUICK = ["--explainers", "random", "--metrics", "comprehensiveness", "--limit", "6",
         "--batch-size", "6", "--no-progress"]


def cli(capsys, *args) -> tuple[int, list[str]]:
    """Exit code and the non-blank lines on stderr of ``faithbench ARGS``."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


def sst2(tmp_path: Path, test: list[dict] | None = None, raw: str | None = None) -> Path:
    """A data folder with sst2/{train,validation,test}.jsonl (the sentences variant):
    ``test`` rows (or ``raw`` text) for the test file."""
    folder = tmp_path / "data" / "sst2"
    folder.mkdir(parents=True)
    good = [{"idx": i, "sentence": f"a {'fine' if i % 2 else 'dull'} film {i}",
             "label": i % 2} for i in range(10)]
    for split in ("train", "validation", "test"):
        rows = test if split == "test" and test is not None else good
        text = raw if split == "test" and raw is not None else "".join(
            json.dumps(r) + "\n" for r in rows)
        (folder / f"{split}.jsonl").write_text(text, encoding="utf-8")
    return folder.parent


def run_sentiment(capsys, data: Path, out: Path) -> tuple[int, list[str]]:
    return cli(capsys, "run", "--tasks", "sentiment", "--data-dir", data, "--variant",
               "sentences", "--out", out, *QUICK)


# -- (a) an example id twice ---------------------------------------------------------------


def test_a_duplicate_id_is_refused_at_load_naming_both_lines(tmp_path, capsys):
    """Before: trained, explained, scored, then `per_example rows, line 6: field 'id':
    example 'test-4' appears twice`, with results over the duplicate left in --out."""
    rows = [{"idx": i, "sentence": f"a fine film {i}", "label": i % 2} for i in range(9)]
    rows[8]["idx"] = 4  # line 9 repeats line 5's idx
    data = sst2(tmp_path, rows)
    out = tmp_path / "out"
    code, err = run_sentiment(capsys, data, out)
    assert code == 2 and len(err) == 1
    test = data / "sst2" / "test.jsonl"
    assert err[0].startswith(f"error: {test}, line 9: field 'idx': 4 already on line 5")
    assert not out.exists()  # nothing written, not even the folder


def test_duplicate_ids_in_esnli_and_alignment_gold(tmp_path):
    from faithbench.tasks.alignment_data import read_gold
    from faithbench.tasks.data import check_jsonl

    esnli = tmp_path / "esnli.jsonl"
    pair = {"premise": "A man sleeps.", "hypothesis": "A man rests.", "label": 0,
            "explanation_1": "sleeping is resting"}
    esnli.write_text("".join(json.dumps({**pair, "pairID": p}) + "\n" for p in ("x1", "x2", "x1")))
    with pytest.raises(DataFileError, match="line 3: field 'pairID': 'x1' already on line 1"):
        check_jsonl(esnli, {"premise": str, "hypothesis": str, "label": int}, {0, 1, 2},
                    ("premise", "hypothesis"), unique="pairID")
    gold = tmp_path / "gold"
    gold.mkdir()
    row = {"src": ["le", "chat"], "tgt": ["the", "cat"], "sure": [[0, 0]], "possible": [[0, 0]]}
    (gold / "test.jsonl").write_text("".join(json.dumps({**row, "id": i}) + "\n"
                                             for i in (1, 2, 2)))
    with pytest.raises(DataFileError, match="line 3: field 'id': 2 already on line 2"):
        read_gold(gold, ("test",))


# -- (b) an --out that cannot be written ---------------------------------------------------


@pytest.mark.parametrize("where, needle", [
    ("file", "is a file, not a folder"),
    ("under_file", "is under {taken}, which is a file, not a folder"),
    ("proc", "is under /proc, the kernel's virtual file system"),
])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, capsys, where, needle):
    """Before: FileExistsError, NotADirectoryError, FileNotFoundError tracebacks."""
    (tmp_path / "taken").write_text("not a folder\n")
    out = {"file": tmp_path / "taken", "under_file": tmp_path / "taken" / "sub",
           "proc": Path("/proc/faithbench-out")}[where]
    code, err = cli(capsys, "run", "--out", out, *QUICK)
    needle = needle.format(taken=tmp_path / "taken")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: --out {out} {needle}")
    assert (tmp_path / "taken").read_text() == "not a folder\n"


def test_an_unwritable_out_is_one_line_before_training(tmp_path, capsys, monkeypatch):
    """The probe file cannot be created (EACCES; as root a chmod does not stop a write,
    so the system's refusal is given here)."""
    def refused(**kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(kwargs.get("dir")))

    monkeypatch.setattr(files, "tempfile", types.SimpleNamespace(mkstemp=refused))
    out = tmp_path / "out"
    code, err = cli(capsys, "run", "--out", out, *QUICK)
    assert code == 2 and err == [f"error: --out {out} cannot be written: Permission denied"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_read_only_folder_is_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, err = cli(capsys, "run", "--out", locked / "out", *QUICK)
    assert code == 2 and len(err) == 1 and f"--out {locked / 'out'} cannot be written" in err[0]


def test_a_full_disk_is_one_line_and_the_run_resumes(tmp_path, capsys, monkeypatch,
                                                     synthetic_ready):
    """ENOSPC while a file is written (its error names no file): one line naming the
    file, exit 2; the temp file is gone, and the same command again finishes."""
    import jsonlines

    def full(self, rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(jsonlines.Writer, "write_all", full)
        code, err = cli(capsys, "run", "--out", out, *QUICK)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"error: cannot write {out / 'explanations'}")
    assert "No space left on device; free space (or give another --out)" in err[0]
    assert not [p for p in out.rglob("*.tmp")]
    assert not read_jsonl(out / "results.jsonl")
    code, err = cli(capsys, "run", "--out", out, *QUICK)
    assert code == 0 and len(read_results(out / "results.jsonl")) == 1


def test_an_append_on_a_full_disk_names_its_file(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records.os, "fsync", full)
    with pytest.raises(OSError) as info:
        records.append_jsonl(path, {"a": 1})
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(path))


def test_a_partial_last_line_is_ignored_and_cut_on_resume(tmp_path, capsys, synthetic_ready):
    """A run killed (or out of space) mid-line leaves a line without its newline: the
    next run does not read it and cuts it before appending."""
    out = tmp_path / "out"
    assert cli(capsys, "run", "--out", out, *QUICK)[0] == 0
    results = out / "results.jsonl"
    whole = results.read_bytes()
    with open(results, "ab") as fh:
        fh.write(whole[: len(whole) // 2])  # half of a line, no newline
    more = [a if a != "comprehensiveness" else "comprehensiveness,sufficiency" for a in QUICK]
    assert cli(capsys, "run", "--out", out, *more)[0] == 0
    text = results.read_text()
    assert text.startswith(whole.decode()) and text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert len(lines) == 2 and len({d["key"] for d in lines}) == 2


# -- (c) a changed run folder --------------------------------------------------------------


def test_a_changed_result_line_names_the_file_and_fresh(tmp_path, capsys, synthetic_ready):
    """Before: `result for task ... has mean 0.5 but its per-example rows average ...`,
    naming neither file nor what to do."""
    out = tmp_path / "out"
    assert cli(capsys, "run", "--out", out, *QUICK)[0] == 0
    results = out / "results.jsonl"
    d = json.loads(results.read_text())
    d["estimate"]["mean"] = 0.5
    results.write_text(json.dumps(d) + "\n")
    code, err = cli(capsys, "run", "--out", out, *QUICK)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"error: {results}, line 1: result for task")
    assert "has mean 0.5 but its per-example rows average" in err[0]
    assert str(out / d["per_example_file"]) in err[0]
    assert "run the same command again with --fresh" in err[0]
    assert cli(capsys, "run", "--out", out, "--fresh", *QUICK)[0] == 0
    assert cli(capsys, "run", "--out", out, *QUICK)[0] == 0


def test_a_changed_per_example_row_names_its_file_and_line(tmp_path, capsys, synthetic_ready):
    out = tmp_path / "out"
    assert cli(capsys, "run", "--out", out, *QUICK)[0] == 0
    rows_file = out / read_results(out / "results.jsonl")[0].per_example_file
    rows = rows_file.read_text().splitlines()
    rows[2] = json.dumps({**json.loads(rows[2]), "value": "high"})
    rows_file.write_text("\n".join(rows) + "\n")
    code, err = cli(capsys, "run", "--out", out, *QUICK)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"error: {rows_file}, line 3: field 'value': not a finite number")
    assert "--fresh" in err[0]


# -- (d) a control character in a text -----------------------------------------------------


def test_an_escaped_nul_is_refused_at_load(tmp_path, capsys):
    """Before: `"a\\u0000b"` was accepted, trained on and stored in the results."""
    raw = "".join(json.dumps({"idx": i, "sentence": f"a fine film {i}", "label": i % 2}) + "\n"
                  for i in range(3)) + '{"idx": 3, "sentence": "a\\u0000b", "label": 1}\n'
    data = sst2(tmp_path, raw=raw)
    out = tmp_path / "out"
    code, err = run_sentiment(capsys, data, out)
    assert code == 2 and err == [(
        f"error: {data / 'sst2' / 'test.jsonl'}, line 4: field 'sentence': character 2 is "
        "U+0000, a control character; remove it (control, bidi and zero-width characters are "
        "refused in text)")]
    assert not out.exists()


@pytest.mark.parametrize("text, kind", [
    ("a\x1b[31mred", "U+001B, a control character"),
    ("a\x7f", "U+007F, a control character"),
    ("a\x85", "U+0085, a control character"),
    ("\u202egood", "U+202E, a bidi control"),
    ("go\u2066od", "U+2066, a bidi control"),
    ("go\u200bod", "U+200B, an invisible format character"),
    ("\ufeffgood", "U+FEFF, an invisible format character"),
])
def test_control_bidi_and_zero_width_characters_are_refused(tmp_path, text, kind):
    from faithbench.tasks.data import check_jsonl

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"sentence": "fine", "label": 0}) + "\n"
                    + json.dumps({"sentence": text, "label": 1}) + "\n")
    with pytest.raises(DataFileError, match=f"line 2: field 'sentence': character \\d is "
                                            f"{re.escape(kind)}"):
        check_jsonl(path, {"sentence": str, "label": int}, {0, 1}, ("sentence",))


def test_tabs_newlines_joiners_and_direction_marks_stay(tmp_path):
    from faithbench.tasks.data import check_jsonl

    path = tmp_path / "t.jsonl"
    texts = ["a\tb\nc\r", "👩\u200d👩\u200d👧 family", "می\u200cخواهم", "\u200fשלום\u200e ok"]
    path.write_text("".join(json.dumps({"sentence": t, "label": 0}) + "\n" for t in texts))
    assert check_jsonl(path, {"sentence": str, "label": int}, {0, 1}, ("sentence",)) == 4


def test_own_data_and_token_lists_refuse_them_too(tmp_path):
    from faithbench.benchmark.core.api import DatasetOptions
    from faithbench.tasks.alignment_data import read_gold
    from faithbench.tasks.own_data import read_dataset

    data = tmp_path / "reviews.jsonl"
    rows = [{"review": f"film {i} {'good' if i % 2 else 'bad'}", "verdict": i % 2}
            for i in range(300)]
    rows[7]["review"] = "bad\x00film"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="row 8, column 'review': character 4 is U\\+0000"):
        read_dataset(DatasetOptions(str(data), "review", "verdict"))
    gold = tmp_path / "gold"
    gold.mkdir()
    (gold / "test.jsonl").write_text(json.dumps(
        {"id": 1, "src": ["le", "ch\u202eat"], "tgt": ["the", "cat"], "sure": [], "possible": []})
        + "\n")
    with pytest.raises(DataFileError, match="line 1: field 'src': token 1: character 3 is "
                                            "U\\+202E, a bidi control"):
        read_gold(gold, ("test",))


# -- (e) an example far over the length cap ------------------------------------------------


def test_a_20000_token_example_is_refused_at_load(tmp_path, capsys):
    """Before: a 0.6 s run became one killed after 170 s, with no message."""
    from faithbench.tasks.sentiment import MAX_TOKENS

    rows = [{"idx": i, "sentence": f"a fine film {i}", "label": i % 2} for i in range(4)]
    rows[2]["sentence"] = " ".join(["good"] * 20_000)
    data = sst2(tmp_path, rows)
    out = tmp_path / "out"
    code, err = run_sentiment(capsys, data, out)
    assert code == 2 and err == [(
        f"error: {data / 'sst2' / 'test.jsonl'}, line 3: field 'sentence': 20,000 tokens, over "
        f"this task's cap of {MAX_TOKENS:,} tokens per example (docs/reference/tasks.md, Length "
        "cap); shorten the text or remove the line")]
    assert not out.exists()


def test_every_task_states_a_cap_and_the_shared_data_is_under_it():
    from faithbench.tasks import alignment_data, nli, own_data, sentiment

    # the longest examples of the shared data (SST-2 56 tokens, SNLI 110, the
    # Hansards' gold pairs 58) are well under; the docs state each cap
    assert (sentiment.MAX_TOKENS, nli.MAX_TOKENS, alignment_data.MAX_TOKENS,
            own_data.MAX_TOKENS) == (256, 256, 256, 512)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "tasks.md").read_text()
    assert "## Length cap" in docs
    for cap in ("256", "512"):
        assert f"{cap} tokens" in docs


def test_own_data_and_pairs_over_the_cap(tmp_path):
    from faithbench.benchmark.core.api import DatasetOptions
    from faithbench.tasks.data import check_jsonl
    from faithbench.tasks.own_data import MAX_TOKENS, read_dataset

    data = tmp_path / "reviews.jsonl"
    rows = [{"review": f"film {i} {'good' if i % 2 else 'bad'}", "verdict": i % 2}
            for i in range(300)]
    rows[5]["review"] = "word " * (MAX_TOKENS + 1)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=f"row 6, column 'review': {MAX_TOKENS + 1} tokens, "
                                         f"over this task's cap of {MAX_TOKENS}"):
        read_dataset(DatasetOptions(str(data), "review", "verdict"))
    pairs = tmp_path / "snli.jsonl"
    pairs.write_text(json.dumps({"premise": "a " * 200, "hypothesis": "b " * 100, "label": 0})
                     + "\n")
    with pytest.raises(DataFileError, match="line 1: premise and hypothesis together: 300 "
                                            "tokens, over this task's cap of 256"):
        check_jsonl(pairs, {"premise": str, "hypothesis": str, "label": int}, {0},
                    ("premise", "hypothesis"), max_tokens=256)


def test_a_read_is_kept_for_the_models_of_the_run(tmp_path):
    """The run reads every task's data before --out is created; the models take those
    rows (read once), and a changed file is read again."""
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.tasks import data as data_module

    folder = sst2(tmp_path)
    calls = []

    def read(options):
        calls.append(options.seed)
        return {"test": [len((folder / "sst2" / "test.jsonl").read_text())]}

    first = data_module.read_once(("t", read), TaskOptions(data_dir=str(folder)), read)
    again = data_module.read_once(("t", read), TaskOptions(data_dir=str(folder), seed=3), read)
    assert first == again and calls == [0]
    (folder / "sst2" / "test.jsonl").write_text('{"idx": 0, "sentence": "x", "label": 0}\n')
    changed = data_module.read_once(("t", read), TaskOptions(data_dir=str(folder)), read)
    assert calls == [0, 0] and changed != first
