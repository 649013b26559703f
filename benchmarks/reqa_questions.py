"""The ReQA cold-start split's training questions as an ODQA question file (JSONL).

Query adaptation and distillation over the ODQA passages take their training questions as
question files (`tt_zoo.data.question_sets`): this writes the questions of one part of the ReQA
split (`tt_zoo.evaluation.reqa.make_splits`, the split the ReQA rows are read on: 80%, seed 0 by
default) as ``{"id", "question", "answers"}`` lines, the answers SQuAD's answer texts. A model
trained on them is read on the split's *test* questions (`--reqa-choose-on validation`), which
this never writes. Written to a temporary name, then renamed; an existing file is refused.

  python -m benchmarks reqa_questions --output runs/questions/reqa80_train.jsonl
"""

from __future__ import annotations

import json
import pathlib
import sys

from benchmarks import arguments

NAME = "reqa_questions"
PARTS = ("train", "validation")  # never the test part


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    arguments.add_output(p, help="the JSONL question file to write (refused if it exists)")
    arguments.add_squad(p)
    p.add_argument("--split-fraction", type=float, default=0.8,
                   help="the cold-start split's training fraction (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the split's seed (default: %(default)s)")
    p.add_argument("--part", choices=PARTS, default="train",
                   help="which part of the split to write (default: %(default)s)")
    args = p.parse_args(argv)
    arguments.check_new_output(p, args.output)
    if not 0 < args.split_fraction < 1:
        p.error(f"--split-fraction must be in (0, 1) (got {args.split_fraction})")
    return args


def question_lines(reqa, question_ids) -> list:
    """One JSONL line per question: its id, text and SQuAD answer texts (deduplicated, in order)."""
    return [json.dumps({"id": q.id, "question": q.text,
                        "answers": list(dict.fromkeys(q.answers))}, ensure_ascii=False)
            for q in reqa.questions_for(question_ids) if q.answers]


def main(argv=None) -> dict:
    from tt_zoo.atomic_io import write_text
    from tt_zoo.evaluation.reqa import build_reqa, make_splits

    args = parse_args(argv)
    reqa = build_reqa(args.squad)
    split = make_splits(reqa, args.split_fraction, seed=args.seed)
    lines = question_lines(reqa, getattr(split, args.part))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.output, "".join(line + "\n" for line in lines))
    print(f"Wrote {args.output}: {len(lines):,} questions of the {args.part} part of the "
          f"{args.split_fraction:g} split (seed {args.seed}) of {pathlib.Path(args.squad).name}")
    return {"output": str(args.output), "questions": len(lines)}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
