"""Issue 44, attacks 1, 2 and 4: an entry's labels are sealed, an entry without its
seals is refused (not warned about), and the site shows invisible and bidi control
characters instead of letting them reorder a name. Each attack is repeated through the
commands a reader runs (``leaderboard``, ``compare``, ``site``, ``release``): exit 2,
one line naming the entry and the field. docs/guides/submit-an-explainer.md (threat
model) lists the command that repeats each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.files import file_hash
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.records import read_jsonl, write_jsonl_atomic
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.leaderboard.entry import read_entries, save_entry, seal_of

FAST = {"limit": 24, "batch_size": 8, "progress": False}
BIDI = "\u202e\u202d\u202a\u202b\u202c\u2066\u2067\u2068\u2069\u200b\u200e\u200f\u061c\ufeff"


@pytest.fixture
def board(tmp_path, synthetic_ready) -> Path:
    """A leaderboard folder with a gradient and a random entry of one small run."""
    out = tmp_path / "out"
    run(RunConfig(out=str(out), explainers=("gradient", "random"),
                  metrics=("comprehensiveness",), **FAST))
    return out / "leaderboard"


def folder_of(board: Path, name: str) -> Path:
    (e,) = [e for e in read_entries(board) if e.name == name]
    return e.path


def header(folder: Path) -> dict:
    return json.loads((folder / "header.json").read_text())


def write_header(folder: Path, h: dict, *, reseal: bool) -> None:
    """Write an edited header; ``reseal``: as a forger who knows the format would, with
    the file hashes and the seal recomputed (they hold no secret)."""
    if reseal:
        h["hashes"] = {n: file_hash(folder / n) for n in ("results.jsonl", "per_example.jsonl")}
        h["seal"] = seal_of(h)
    (folder / "header.json").write_text(json.dumps(h))


def refused(capsys, argv: list[str], *needles: str) -> str:
    """``faithbench argv`` exits 2 with one line on stderr that holds every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def swap_labels(board: Path, *, reseal: bool, schema: int | None = None) -> tuple[Path, Path]:
    """Attack 1: gradient's and random's names swapped in their headers only, with a
    citation and a submitter made up."""
    grad, rand = folder_of(board, "gradient"), folder_of(board, "random")
    g, r = header(grad), header(rand)
    for h, name in ((g, "random"), (r, "gradient")):
        h["explainer_name"] = name
        h["explainer_spec"] = {**h["explainer_spec"], "name": name, "citation": "Nobody 2026"}
        h["submitter"] = "someone else"
        if schema is not None:
            h["schema_version"] = schema
            h.pop("seal", None)
        write_header(grad if h is g else rand, h, reseal=reseal)
    return grad, rand


def verbs(board: Path, tmp_path: Path) -> list[list[str]]:
    return [["leaderboard", "--entries", str(board), "--short-names"],
            ["compare", "gradient", "random", "--entries", str(board)],
            ["site", "--entries", str(board), "--out", str(tmp_path / "site")],
            ["release", "--entries", str(board), "--version", "vtest", "--out",
             str(tmp_path / "release")]]


def test_relabelled_names_are_refused_by_the_seal(board, tmp_path, capsys):
    grad, _ = swap_labels(board, reseal=False)
    for argv in verbs(board, tmp_path):
        refused(capsys, argv, f"entry {grad.name}", "'explainer_name' (changed)",
                "not the one sealed")
    assert not (tmp_path / "site").exists() and not (tmp_path / "release").exists()


def test_relabelled_names_are_refused_even_resealed(board, tmp_path, capsys):
    """A forger who recomputes the seal still cannot show gradient's numbers as random's:
    the name must be the one the explainer id (in every result record, hashed into the
    entry id) gives."""
    grad, _ = swap_labels(board, reseal=True)
    for argv in verbs(board, tmp_path):
        refused(capsys, argv, f"entry {grad.name}", "field 'explainer_name' is 'random'",
                "gives 'gradient'", "relabelled")


def test_a_schema_1_entry_is_checked_against_its_id_and_its_free_text_is_not_shown(
        board, tmp_path, capsys):
    """An entry written before the seal (schema 1: file hashes only): relabelling is
    refused all the same; its unsealed free text is dropped, never shown."""
    swap_labels(board, reseal=True, schema=1)
    refused(capsys, ["leaderboard", "--entries", str(board)], "relabelled")
    for folder in entry_folders(board):
        h = header(folder)
        name = short_name(h["explainer"])
        h["explainer_name"] = name
        h["explainer_spec"]["name"] = name
        write_header(folder, h, reseal=True)
    for e in read_entries(board):
        assert e.header["schema_version"] == 1
        assert e.header["submitter"] == "" and "citation" not in e.header["explainer_spec"]


def entry_folders(board: Path) -> list[Path]:
    return [f for f in board.iterdir() if f.is_dir() and not f.name.startswith(".")]


def inflate_random(board: Path, *, schema: int | None, drop: tuple[str, ...]) -> Path:
    """Attack 2: 0.5 added to every per-example row of the random entry, the stored mean
    recomputed, and the seals deleted (``drop``)."""
    rand = folder_of(board, "random")
    rows = read_jsonl(rand / "per_example.jsonl")
    rows = [{**r, "value": r["value"] + 0.5} for r in rows]
    write_jsonl_atomic(rand / "per_example.jsonl", rows)
    results = read_jsonl(rand / "results.jsonl")
    for rec in results:
        mine = [r["value"] for r in rows if r["metric"] == rec["metric"]]
        rec["estimate"]["mean"] = math.fsum(mine) / len(mine)
    write_jsonl_atomic(rand / "results.jsonl", results)
    h = header(rand)
    for field in drop:
        h.pop(field, None)
    if schema is not None:
        h["schema_version"] = schema
    write_header(rand, h, reseal=False)
    return rand


@pytest.mark.parametrize("schema,drop,field", [
    (None, ("hashes",), "'hashes'"),               # the attack as reported
    (None, ("hashes", "seal"), "'hashes'"),
    (1, ("hashes", "seal"), "'hashes'"),            # and posing as an entry from before seals
])
def test_an_entry_without_its_seals_is_refused_not_warned_about(board, tmp_path, capsys,
                                                                schema, drop, field):
    rand = inflate_random(board, schema=schema, drop=drop)
    for argv in verbs(board, tmp_path):
        refused(capsys, argv, f"entry {rand.name}", f"field {field} is missing",
                "refused")


def test_a_current_entry_without_its_seal_alone_is_refused(board, capsys):
    rand = folder_of(board, "random")
    h = header(rand)
    del h["seal"]
    write_header(rand, h, reseal=False)
    refused(capsys, ["leaderboard", "--entries", str(board)], f"entry {rand.name}",
            "field 'seal' is missing")


def test_the_site_shows_bidi_and_invisible_characters(board, tmp_path):
    """Attack 4: free text (sealed, so it stays) holding every bidi and invisible
    control character reaches no page raw: each is written as [U+XXXX]."""
    (e,) = [e for e in read_entries(board) if e.name == "gradient"]
    spec = {**e.header["explainer_spec"], "citation": f"{BIDI}tneidarg",
            "description": "\u202etneidarg"}
    save_entry(board, explainer_spec=spec, results=e.results, per_example=e.per_example,
               notes=f"notes \u202etneidarg{BIDI}", submitter="\u2067someone\u2069")
    assert main(["site", "--entries", str(board), "--out", str(tmp_path / "site")]) == 0
    pages = {p: p.read_text(encoding="utf-8") for p in (tmp_path / "site").iterdir()}
    for path, text in pages.items():
        raw = sorted({f"U+{ord(c):04X}" for c in text if not c.isprintable() and c not in "\n\t"})
        assert not raw, (path.name, raw)
    shown = "".join(pages.values())
    assert "[U+202E]tneidarg" in shown and "[U+2067]someone[U+2069]" in shown
