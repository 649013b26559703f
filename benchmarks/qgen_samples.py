"""results/qgen_samples.md: 20 questions of the qgen pair source's offline generator, drawn at
random from Wikispeedia passages, with its yield and speed over 2,000 passages.

The judgement at the top of the report is written by hand after reading the 20 samples; this
script keeps it (everything above the "## Samples" line) when it rewrites the file.

  python -m benchmarks.qgen_samples
"""

from __future__ import annotations

import random
import time

from benchmarks import arguments

REPO = arguments.REPO
DATA = arguments.data_dir()
OUTPUT = REPO / "results" / "qgen_samples.md"


def main(argv=None):
    arguments.parser(__doc__).parse_args(argv)  # no flags: --help, and nothing else
    from tt_zoo.atomic_io import write_text
    from tt_zoo.data.article_sources import read_articles
    from tt_zoo.data.passages import make_passages
    from tt_zoo.data.question_generation import get_generator

    generator = get_generator("cloze")
    passages = [p for a in read_articles(DATA / "wikispeedia", progress=False)
                for p in make_passages(a, 96)]
    rng = random.Random(0)
    measured = rng.sample(passages, 2000)
    t = time.perf_counter()
    made = [generator.generate(p.title, p.text, random.Random(i)) for i, p in enumerate(measured)]
    seconds = time.perf_counter() - t
    kept = [(p, m) for p, m in zip(measured, made) if m is not None]
    header = "# Generated questions of the `qgen` pair source (`cloze` generator)\n\n"
    if OUTPUT.is_file() and "## Samples" in OUTPUT.read_text():
        header = OUTPUT.read_text().split("## Samples")[0]
    lines = ["## Samples", "",
             f"{len(passages):,} passages (at most 96 words, as the pair sets); over 2,000 drawn "
             f"with seed 0 the generator made a question for {len(kept):,} "
             f"({100 * len(kept) / 2000:.1f}%) at {2000 / seconds:,.0f} passages/s on one core. "
             "The first 20 it made:", "",
             "| # | page | question | answer |", "|---|---|---|---|"]
    for i, (p, (question, answer)) in enumerate(kept[:20], 1):
        lines.append(f"| {i} | {p.title} | {question.replace('|', '/')} | "
                     f"{answer.replace('|', '/')} |")
    write_text(OUTPUT, header + "\n".join(lines) + "\n")
    print(OUTPUT.read_text())


if __name__ == "__main__":
    main()
