"""Result records: historic files still load, CIs are reproducible from the stored
per-example values, and crash-truncated lines are never read as results."""

from pathlib import Path

import pytest

from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error
from faithbench.benchmark.core.records import append_jsonl, read_jsonl, read_results
from faithbench.benchmark.core.stats import BOOTSTRAP, bootstrap

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def test_schema_v1_results_load_and_reproduce_their_ci():
    records = read_results(FIXTURES / "schema_v1_results.jsonl")
    assert [r.metric.split("[")[0] for r in records] == ["aopc_morf", "aopc_lerf"]
    for r in records:
        values = [row["value"] for row in read_jsonl(FIXTURES / r.per_example_file)]
        est = bootstrap(values, n_resamples=r.estimate.n_resamples,
                        seed=r.estimate.bootstrap_seed)
        # same values, same interval, to the last bit; fields added since (the interval's
        # method, the undefined count) read as their defaults for a v1 record
        assert est == r.estimate
        assert (est.method, est.undefined) == (BOOTSTRAP, 0)
        assert r.provenance.data_fingerprint and r.provenance.checkpoint


def test_truncated_last_line_is_ignored_then_repaired(tmp_path):
    path = tmp_path / "results.jsonl"
    append_jsonl(path, {"a": 1})
    with open(path, "a") as fh:
        fh.write('{"a": 2, "half')  # what kill -9 mid-write leaves
    assert read_jsonl(path) == [{"a": 1}]
    append_jsonl(path, {"a": 3})
    assert read_jsonl(path) == [{"a": 1}, {"a": 3}]
    assert path.read_text().count("\n") == 2


def test_corrupt_complete_line_names_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(DataFileError, match=r"results.jsonl, line 2"):
        read_jsonl(path)


def test_bytes_that_are_not_utf8_name_file_line_and_offset(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "caf\xe9"}\n')
    with pytest.raises(NotUtf8Error) as info:
        read_jsonl(path)
    # line 2 starts at byte 9; 0xe9 follows its 10 bytes {"b": "caf: offset 19, byte 11
    assert (info.value.line, info.value.offset) == (2, 19)
    assert "0xe9" in str(info.value) and "byte 11 of the line" in str(info.value)
    assert str(path) in str(info.value)


def test_record_missing_field_is_named(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"record_type": "result", "schema_version": 1, "key": "k"}\n')
    with pytest.raises(DataFileError, match="field 'task'"):
        read_results(path)


def _append_many(path: str, writer: int) -> None:
    for i in range(100):
        append_jsonl(Path(path), {"writer": writer, "i": i, "pad": "x" * 20_000})


def test_two_processes_appending_to_one_file_lose_and_cut_no_line(tmp_path):
    """Lines longer than the write buffer, from 3 processes at once: every line arrives
    whole (the lock keeps a writer's tail repair from cutting another's line)."""
    import multiprocessing

    path = tmp_path / "results.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    rows = read_jsonl(path)
    assert sorted((r["writer"], r["i"]) for r in rows) == [(w, i) for w in range(3)
                                                            for i in range(100)]
