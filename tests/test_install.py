"""What ``pip install .`` puts on a user's machine: one import package, ``faithbench``,
so a notebook folder with its own ``metrics.py`` or ``tasks.py`` still runs the API."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_wheel_installs_only_faithbench(tmp_path):
    source = tmp_path / "src"  # a copy: setuptools leaves build/ beside what it builds
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, source / name)
    for folder in ("faithbench", "benchmark", "tasks", "metrics", "leaderboard", "submissions"):
        shutil.copytree(REPO / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path), str(source)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = tmp_path.glob("faithbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"faithbench", f"{wheel.name.split('-py3')[0]}.dist-info"}, top
    for module in ("faithbench/api.py", "faithbench/testing.py",
                   "faithbench/benchmark/cli/__init__.py", "faithbench/benchmark/cli/run.py",
                   "faithbench/benchmark/core/api.py", "faithbench/metrics/erasure.py",
                   "faithbench/tasks/sentiment.py", "faithbench/leaderboard/rank.py",
                   "faithbench/submissions/TEMPLATE.py"):
        assert module in names
    shipped = [f"faithbench/leaderboard/{p.relative_to(REPO / 'leaderboard')}"
               for p in (REPO / "leaderboard" / "releases").rglob("*") if p.is_file()]
    # the published releases ship in the wheel, models and reference entries included
    assert set(shipped) <= set(names)
    assert any(n.endswith(".pt") and "/models/" in n for n in names)
    entry = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt")
    assert b"faithbench = faithbench.benchmark.cli:main" in entry


def test_a_notebook_folder_with_its_own_metrics_module_runs_the_api(tmp_path, synthetic_ready):
    """Before: ``import metrics`` inside faithbench found the user's metrics.py."""
    for name in ("metrics", "tasks", "benchmark", "leaderboard", "submissions"):
        (tmp_path / f"{name}.py").write_text("raise ImportError('the user\\'s own module')\n")
    code = ("from faithbench.benchmark.plan import RunConfig\n"
            "from faithbench.benchmark.runner import run\n"
            "done = run(RunConfig(limit=10, explainers=('random',), metrics=('comprehensiveness',),"
            " out='out', progress=False, write_leaderboard=False))\n"
            "print('computed', done.computed)\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "computed 1" in done.stdout


def test_every_package_folder_ships_in_the_wheel():
    """Each folder with an __init__.py under the mapped source folders is listed in
    pyproject.toml's packages: a folder left out works in an editable install and is
    missing from the wheel (faithbench.benchmark.debate was, once)."""
    import tomllib
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    conf = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    found = set()
    for name, folder in conf["package-dir"].items():
        for init in (root / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(root / folder).parts
            found.add(".".join((name, *rel)))
    assert found - listed == set(), found - listed
