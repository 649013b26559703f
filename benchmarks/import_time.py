"""How long a fresh process takes to `import tt_zoo; tt_zoo.list_models()` (target < 1 s).

Listing models and reading specs load no TensorFlow (issue 12). Each run is a new interpreter
(`python -c`), timed inside it from before the import to after the listing (interpreter
start-up excluded); the median and the maximum of --runs are printed.

  python benchmarks/import_time.py --runs 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = ("import sys, time; t = time.perf_counter(); import tt_zoo; "
         "names = tt_zoo.list_models(); print(time.perf_counter() - t, len(names), "
         "'tensorflow' in sys.modules)")


def time_once() -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout.split()
    return {"seconds": float(out[0]), "models": int(out[1]), "tensorflow": out[2] == "True"}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    runs = [time_once() for _ in range(args.runs)]
    result = {"median_s": statistics.median(r["seconds"] for r in runs),
              "max_s": max(r["seconds"] for r in runs), "runs": args.runs,
              "models_listed": runs[0]["models"],
              "tensorflow_imported": any(r["tensorflow"] for r in runs)}
    print(f"import tt_zoo + list_models(): median {result['median_s']:.3f} s, max "
          f"{result['max_s']:.3f} s over {args.runs} fresh processes; "
          f"{result['models_listed']} models; TensorFlow imported: "
          f"{result['tensorflow_imported']}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
