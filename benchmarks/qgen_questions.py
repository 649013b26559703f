"""Generated questions over the ODQA passages as a question file (JSONL), for distillation.

Issue 67 lists questions generated over Wikispeedia passages among the distillation sources:
questions from the whole corpus rather than from one question set's distribution. This draws
``--count`` passages of the ODQA collection (the 100-word Wikispeedia passages with titles,
`tt_zoo.data.passage_collection`) at random with ``--seed`` and runs the zoo's question
generator on each (`tt_zoo.data.question_generation`; ``cloze``: answer-aware cloze-to-question
rules, ProQA's source at CPU scale); a passage it makes no question of is skipped. Each line is
``{"id", "question", "answers", "passage"}``, the answer a verbatim span of the passage, the id
``qgen-ROW``. `tt-zoo teacher-scores --questions FILE` scores a teacher over each question's
candidates as for any question file. Written to a temporary name, then renamed; an existing
file is refused.

  python -m benchmarks qgen_questions --count 12000 --output runs/questions/qgen12k.jsonl
"""

from __future__ import annotations

import json
import random
import sys

from benchmarks import arguments

NAME = "qgen_questions"


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    arguments.add_output(p, help="the JSONL question file to write (refused if it exists)")
    arguments.add_data_dir(p)
    p.add_argument("--count", type=int, default=12_000,
                   help="passages drawn (questions: those the generator makes one of) "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the draw's seed (default: %(default)s)")
    p.add_argument("--generator", default="cloze",
                   help="a registered question generator (default: %(default)s)")
    p.add_argument("--passage-words", type=int, default=100,
                   help="words a passage, as tt-zoo odqa cuts them (default: %(default)s)")
    args = p.parse_args(argv)
    arguments.check_new_output(p, args.output)
    if args.count < 1:
        p.error(f"--count must be at least 1 (got {args.count})")
    return args


def question_lines(collection, rows, generator, seed: int) -> list:
    """One JSONL line per drawn passage row the generator makes a question of."""
    lines = []
    for row in rows:
        made = generator.generate(collection.titles[row], collection.texts[row],
                                  random.Random(f"{seed}-{row}"))
        if made is None:
            continue
        question, answer = made
        lines.append(json.dumps({"id": f"qgen-{row}", "question": question, "answers": [answer],
                                 "passage": collection.ids[row]}, ensure_ascii=False))
    return lines


def main(argv=None) -> dict:
    from tt_zoo.atomic_io import write_text
    from tt_zoo.data.passage_collection import passage_collection
    from tt_zoo.data.question_generation import get_generator

    args = parse_args(argv)
    collection = passage_collection(args.data_dir / "wikispeedia", args.passage_words)
    try:
        generator = get_generator(args.generator)
    except ValueError as e:
        raise SystemExit(f"--generator: {e}") from None
    count = min(args.count, len(collection))
    rows = sorted(random.Random(args.seed).sample(range(len(collection)), count))
    lines = question_lines(collection, rows, generator, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.output, "".join(line + "\n" for line in lines))
    print(f"Wrote {args.output}: {len(lines):,} {generator.name} questions from {count:,} of "
          f"{len(collection):,} passages (seed {args.seed})")
    return {"output": str(args.output), "questions": len(lines), "passages_drawn": count}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
