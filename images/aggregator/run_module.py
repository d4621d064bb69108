"""mainApplicationFile of a chart job given as a module (``local:///opt/sparkwire/run_module.py``).

spark-submit runs a Python file, not ``python -m``: this one runs the module named by its first argument as
``__main__`` with the remaining arguments, e.g. ``run_module.py sparkwire.examples.orders run`` is
``python -m sparkwire.examples.orders run``. The module's exit status is the driver's.
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} MODULE [ARGUMENT ...]")
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
