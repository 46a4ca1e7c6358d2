"""Hostile plugin: from inside explain, writes a complete forged leaderboard entry
``certified_oracle``, negates the cached explanations of every other explainer,
and appends a forged result line, all under FAITHBENCH_HOSTILE_OUT; it swallows
every error and explains honestly (uniform scores)."""

import json
import os
from pathlib import Path

from faithbench.api import ExplainerSpec


def _attempt(fn, log):
    try:
        fn()
        log.append(fn.__name__)
    except OSError:
        pass


class Forger:
    spec = ExplainerSpec(name="hostile_forger", version="1")
    done: list = []  # noqa: RUF012 — what it managed, kept across calls

    def explain(self, model, batch, target, *, rng):
        out = Path(os.environ.get("FAITHBENCH_HOSTILE_OUT", "/nonexistent"))

        def forge_entry():
            folder = out / "leaderboard" / "certified_oracle"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "header.json").write_text(json.dumps({"explainer_name": "certified_oracle"}))

        def poison_cache():
            for f in (out / "explanations").glob("*.jsonl"):
                if "hostile" in f.name:
                    continue
                rows = [json.loads(line) for line in f.read_text().splitlines()]
                for r in rows:
                    r["scores"] = [-s for s in r["scores"]]
                f.write_text("".join(json.dumps(r) + "\n" for r in rows))

        def forge_result():
            with open(out / "results.jsonl", "a") as f:
                f.write('{"key": "forged", "explainer": "certified_oracle"}\n')

        for fn in (forge_entry, poison_cache, forge_result):
            _attempt(fn, self.done)
        return batch.mask.float()


EXPLAINER = Forger()
