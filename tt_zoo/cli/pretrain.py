"""Pretrains a registered two-tower variant on pretraining pairs, then exports it for serving.

Chang et al. 2020, Sec. 5.1: Adam 1e-4 with 10% linear warm-up then linear decay, the corrected
sampled softmax over the (global) batch. Checkpoints every N steps and resumes after a kill;
TensorBoard scalars under WORKDIR/logs; a progress bar with pairs/s.

  tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp \\
      --output runs/pairs/ict_bfs_wlp
  tt-zoo pretrain --variant ict_bfs_wlp_512 --pairs runs/pairs/ict_bfs_wlp \\
      --batch-size 128 --steps 1000 --strategy cpu --export runs/models/ict_bfs_wlp_512

On TPUs: --strategy tpu --tpu NAME (the cluster resolver's address, as in the Model Garden);
--workdir, --export, --token-cache and --pairs may be gs:// URLs (every file goes through
tf.io.gfile).
--hard-negatives H adds H BM25 hard negatives per pair (mined once by
`tt_zoo.mining.hard_negatives` and stored in PAIRS/hard_negatives/, or --hard-negatives-dir).
`none` variants skip training (--steps 0) and export the initialised model; `mlm` variants
pretrain the encoder with the masked-LM objective on --mlm-examples (tt-zoo make-pairs
--tasks mlm) and initialise both towers from it. --grad-cache-chunk N trains on the whole batch
with the activation memory of N pairs (GradCache, `tt_zoo.training.grad_cache`). --cluster-every N draws each batch from one
k-means cluster of the documents, re-clustered every N steps with the current document tower
(ProQA, Xiong et al. 2020, Sec. 3.2; tt_zoo.training.clustered_batches).
`colbert_` variants (ColBERT's late interaction, `tt_zoo.modeling.late_interaction_model`) train
the same way on the same pairs; --init-from a single-vector BERT export copies its encoder (the
token projection starts fresh). They refuse --grad-cache-chunk, --cluster-every and
--eval-every, which need one vector per text.
--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `PretrainConfig`); flags given with it override it.
"""

# The run itself is the library's `tt_zoo.training.pretrain` (`tt_zoo.training.pretrain_run`);
# this command parses and checks the flags, calls it, and exits with its `RunError`'s message.

from __future__ import annotations

import os
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import PROJECT_VOCAB, default_squad_path, default_vocab_path
from tt_zoo.training.pretrain_run import PretrainConfig, pretrain, tower_shape
from tt_zoo.configs.run_config import RunError, recorded_command


add_arguments = PretrainConfig.add_arguments  # (the flags of its run config)


def parse_args(argv=None) -> PretrainConfig:
    parser, args = parsing.parse_run_config(PretrainConfig, __doc__, argv)
    try:
        tower_shape(args.tower_shape)
    except ValueError as e:
        parser.error(f"--tower-shape: {e}")
    if not args.vocab:
        args.vocab = default_vocab_path()
        if args.vocab != str(PROJECT_VOCAB) and os.path.isfile(args.vocab):  # cells once took it
            print(f"Not in a git clone of tt_zoo: the default vocabulary is BERT's uncased one, "
                  f"{args.vocab}; the zoo's models use the clone's saved_models/vocab/vocab.txt "
                  f"(pass --vocab to choose).", file=sys.stderr)
    return PretrainConfig.from_namespace(args)


def main(argv=None):
    return run(parse_args(argv), recorded_command("pretrain", argv))


def run(config: PretrainConfig, command: str) -> int:
    """Pretrains (resuming from WORKDIR) and exports the variant of `config`; `command` is the
    command line the summary records."""
    try:
        result = pretrain(config, command=command, default_squad=default_squad_path())
    except RunError as e:
        sys.exit(str(e))
    if result.export:
        print(f"exported to {config.output.export} (sha256 {result.export['sha256']})")
    # Without --export, the last checkpoint in WORKDIR/checkpoints holds the final weights;
    # tt-zoo export --variant ... --checkpoint WORKDIR exports it later.
    return 0


if __name__ == "__main__":
    sys.exit(main())
