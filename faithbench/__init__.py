"""faithbench: scores explanation methods for faithfulness on trained NLP models.

One import package. Plugin authors import ``faithbench.api``; test models and plugin
checks are in ``faithbench.testing``. The engine (``faithbench.benchmark``), the tasks,
metrics, reference explainers (``faithbench.submissions``) and the leaderboard are
subpackages, kept in the repository as the top-level folders the design names.
"""

from pathlib import Path

__version__ = "0.1.0"

# A source checkout keeps benchmark/, tasks/, ... beside this folder; the wheel puts them
# inside it. Either way ``faithbench.benchmark`` is the one name of that code.
_here = Path(__file__).resolve().parent
if not (_here / "benchmark").is_dir() and (_here.parent / "benchmark" / "__init__.py").is_file():
    __path__.append(str(_here.parent))
