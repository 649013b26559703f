"""Distils a Transformer model into a static bag-of-words model (model2vec) and exports it.

Each vocabulary token's vector is the model's embedding of that token alone, reduced by PCA and
weighted by SIF over the token frequencies of an article corpus (the text you will search);
a text is the mean of its tokens' vectors (`tt_zoo.modeling.static_distillation`). Encoding is
hundreds of times faster than the Transformer's; `tt-zoo multitask --init` trains it further.

  tt-zoo distill-static --model minilm_l6_384 --corpus $TT_ZOO_DATA/wikispeedia \\
      --dim 384 --export runs/models/static_minilm_l6_384
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, type=parsing.model_name_or_path,
                   help="the Transformer model (a name or an export)")
    p.add_argument("--corpus", required=True,
                   help="articles whose token frequencies weigh the table (any source "
                        "tt-zoo make-pairs reads), cut into --passage-words passages")
    p.add_argument("--passage-words", type=numbers.count(high=10_000), default=100,
                   help="words per passage of the corpus")
    p.add_argument("--dim", type=numbers.count(high=8192), default=256,
                   help="PCA dimension of the table (the embedding size)")
    p.add_argument("--name", default=None,
                   help="the exported model's name (default: static_<model without its size>_"
                        "<dim>, e.g. static_minilm_l6_384 for --dim 384, the registry's name)")
    p.add_argument("--export", required=True, help="the export folder to write (atomically)")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    return parsing.command_parser("distill-static", __doc__, add_arguments).parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import tt_zoo  # noqa: PLC0415
    from tt_zoo.errors import TtZooError  # noqa: PLC0415
    from tt_zoo.modeling.static_distillation import (corpus_token_counts,  # noqa: PLC0415
                                                     distill_static_model)
    from tt_zoo.evaluation.odqa import passage_collection  # noqa: PLC0415

    try:
        teacher = tt_zoo.load(args.model)
        corpus = passage_collection(args.corpus, args.passage_words,
                                    progress=not args.no_progress)
        counts, documents = corpus_token_counts(teacher.keras_model, corpus.titles, corpus.texts)
        static, stats = distill_static_model(teacher.keras_model, counts, dim=args.dim)
        stem = teacher.name.rsplit("_", 1)[0] if teacher.name.rsplit("_", 1)[-1].isdigit() \
            else teacher.name
        name = args.name or f"static_{stem}_{args.dim}"
        from tt_zoo.artifacts.export import export_saved_model  # noqa: PLC0415
        from tt_zoo.artifacts.model_card import WEIGHTS_LICENSE  # noqa: PLC0415
        export_saved_model(static, args.export, {
            "name": name, "encoder": "bow_mlp", "pretraining": "distilled",
            "license": WEIGHTS_LICENSE, "model_options": static_options(static),
            "training_data": f"none: distilled from {teacher.name} (model2vec: each token's "
                             f"embedding alone, PCA to {args.dim}, SIF weights over "
                             f"{documents:,} passages of {args.corpus})",
            "base_model": {"from": teacher.name, "name": teacher.name,
                           "sha256": teacher.card.provenance.sha256,
                           "copied": "distilled: each vocabulary token's embedding alone",
                           "new": ["unigram_embeddings (PCA + SIF of the distilled rows)"]},
            "notes": f"Static embeddings distilled from {teacher.name}: {stats}."})
    except (TtZooError, KeyError, FileNotFoundError, FileExistsError, ValueError) as e:
        sys.exit(f"tt-zoo distill-static: {e}")
    print(f"distilled {teacher.name} into {args.export} ({stats})")
    return 0


def static_options(static) -> dict:
    """The card's ``model_options`` of a static model (`tt_zoo.zoo.registry.ModelOptions`):
    mean of its token rows, one shared tower, cosine scores at its loss's temperature."""
    import dataclasses  # noqa: PLC0415

    from tt_zoo.zoo.registry import ModelOptions  # noqa: PLC0415
    return dataclasses.asdict(ModelOptions(
        pooling="mean", share_towers=True, normalize_embeddings=True,
        temperature=static.retrieval_loss.temperature, bow_output_activation=None))


if __name__ == "__main__":
    sys.exit(main())
