"""`python -m benchmarks NAME [ARGS]`: the one runner of the benchmarks. It runs NAME exactly as
``python -m benchmarks.NAME [ARGS]`` does (the script's own entry point, its ``main(argv)``: the
same flags, ``--help``, output and exit status); with no NAME it lists the benchmarks with their
purpose, as benchmarks/__init__.py's index gives it. The flags the scripts share are defined once,
in benchmarks/arguments.py.

  python -m benchmarks                      # the list
  python -m benchmarks odqa --help          # one benchmark's flags
  python -m benchmarks odqa --model ict_512
"""

from __future__ import annotations

import difflib
import pathlib
import re
import runpy
import sys
from typing import Dict, List, Optional

import benchmarks

HERE = pathlib.Path(__file__).resolve().parent
_ENTRY = re.compile(r"- (\w+)(?: \([^)]*\))?: (.*)")  # "- NAME: purpose", "- NAME (note): ..."


def index() -> Dict[str, str]:
    """NAME -> purpose: the entries of benchmarks/__init__.py's index, each on one line."""
    entries: Dict[str, str] = {}
    name = None
    for line in benchmarks.__doc__.splitlines():
        found = _ENTRY.match(line)
        if found:
            name = found.group(1)
            entries[name] = found.group(2).strip()
        elif name is not None and line.startswith("  ") and line.strip():
            entries[name] += " " + line.strip()
        else:
            name = None
    return entries


def runnable() -> List[str]:
    """Every script of the package that runs as ``python -m benchmarks.NAME``: a module with an
    ``if __name__ == "__main__":`` entry, or a package with a __main__.py (the shared modules,
    arguments, measure and text_rows, are not)."""
    names = [p.stem for p in HERE.glob("*.py")
             if p.stem not in ("__init__", "__main__")
             and 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")]
    names += [p.name for p in HERE.iterdir() if (p / "__main__.py").is_file()]
    return sorted(names)


def usage() -> str:
    entries = index()
    width = max(map(len, entries)) + 2
    lines = ["usage: python -m benchmarks NAME [ARGS]  (NAME --help: its flags; the same as "
             "python -m benchmarks.NAME [ARGS])", "", "benchmarks:"]
    lines += [f"  {name:<{width}}{purpose}" for name, purpose in sorted(entries.items())]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    name, args = argv[0], argv[1:]
    scripts = runnable()
    if name not in scripts:
        close = difflib.get_close_matches(name, scripts, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        sys.exit(f"python -m benchmarks: {name!r} is not a benchmark{hint}; "
                 "'python -m benchmarks' lists them.")
    module = f"benchmarks.{name}"
    path = HERE / name / "__main__.py" if (HERE / name).is_dir() else HERE / f"{name}.py"
    sys.argv = [str(path), *args]  # as `python -m benchmarks.NAME` sets it (argparse's prog)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
