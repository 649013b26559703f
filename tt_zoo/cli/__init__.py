"""`tt-zoo COMMAND [ARGS]`: find, encode and search with the zoo's models, and the pipeline's
recipes, data to serving (Chang et al. 2020).

Each command is a module here with ``add_arguments(parser)`` and ``main(argv)``;
`python -m tt_zoo.cli NAME` runs the same one (and so does `recipes/pretrain.py`, pretrain's
documented path). Only the module of the command given is imported, and it imports TensorFlow
only after its arguments are parsed, so ``--help`` is quick.

    tt-zoo list --shipped
    tt-zoo index examples/squad_sample --model multitask_static_minilm_l6_384 --output runs/idx
    tt-zoo search --index runs/idx --query "who discovered penicillin?"
    tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp --output runs/pairs/x
    tt-zoo pretrain --variant ict_bfs_wlp_512 --pairs runs/pairs/x --export runs/models/x
    tt-zoo evaluate --model ict_bfs_wlp_512 --bm25
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from tt_zoo._version import __version__
from tt_zoo.cli.parsing import PROG, HelpFormatter, parser_settings

# command -> (module in tt_zoo.cli, what it does): using the zoo, then the pipeline in order.
COMMANDS = {
    "list": ("list_models", "the models that load (--include-recipes: every registered name); "
                            "--shipped: with their measured numbers"),
    "encode": ("encode", "embed the texts of a JSONL/TSV/TXT file with a model into a .npy file"),
    "index": ("index", "index a corpus once with a model of any kind, BM25 or a hybrid "
                       "(resumable)"),
    "search": ("search", "query a saved index (or a file of passages); a topics file to a TREC "
                         "run"),
    "index-corpus": ("index_corpus", "encode a large JSONL corpus on Apache Beam into embedding "
                                     "shards, a ScaNN index each"),
    "demo": ("demo", "load the flagship, index ReQA-SQuAD(dev), answer and score"),
    "import-checkpoint": ("import_checkpoint", "import a public BERT checkpoint (Hugging Face, "
                                               "sentence-transformers, Google) as a model"),
    "distill-static": ("distill_static", "distil a Transformer model into a static BoW model "
                                         "(model2vec: PCA + SIF)"),
    "learn-vocab": ("learn_vocab", "learn a WordPiece vocabulary from articles"),
    "make-pairs": ("make_pairs", "ICT/BFS/WLP pairs or MLM examples as TFRecord shards (Sec. 3)"),
    "mine-negatives": ("mine_negatives", "BM25 hard negatives for a pair set, stored beside it"),
    "pretrain": ("pretrain", "pretrain a registered variant, resumable, then export it (Sec. 5.1)"),
    "export": ("export", "export a checkpoint for serving, with a ScaNN index and retrieve model"),
    "train-term-weights": ("train_term_weights",
                           "HDCT term weights from pairs' query terms, from an export's encoder"),
    "finetune": ("finetune", "fine-tune on a ReQA split and evaluate (Sec. 5)"),
    "teacher-scores": ("teacher_scores", "mine candidates (BM25, student and teacher top-k) and "
                                         "score them with a teacher, for distillation"),
    "multitask": ("multitask", "train one retriever on several tasks (Maillard et al. 2021), "
                               "resumable, export"),
    "average": ("average", "the weighted mean of the weights of models of one architecture "
                           "(a model soup), as one export"),
    "adapt-queries": ("adapt_queries", "train a model's query tower against its own passage "
                                       "index (ADORE), resumable, export"),
    "evaluate": ("evaluate", "score a TREC run against qrels (nDCG@10, R@k, MRR@10); ReQA of "
                             "models and BM25"),
    "odqa": ("odqa", "open-domain QA answer recall of models and BM25 (DPR's top-k accuracy)"),
    "reproduce": ("reproduce", "the Tables 3 and 5 grid: pretrain, fine-tune, evaluate, ship"),
    "ship": ("ship", "ship an export (any kind) to saved_models/ with its measured tables"),
}


def command_module(name: str):
    """The module of command `name` (imported now: light until its `main` runs)."""
    return importlib.import_module(f"tt_zoo.cli.{COMMANDS[name][0]}")


def build_parser(command=None) -> argparse.ArgumentParser:
    """``tt-zoo``'s parser: one subparser a command, with its arguments for `command` (only
    that command's module is imported; the others list their one-line help)."""
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=HelpFormatter,
        description=__doc__.split("\n\n")[0],
        epilog=f"'{PROG} COMMAND --help' shows a command's options.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     title="commands")
    for name, (_, what) in COMMANDS.items():
        if name == command:
            module = command_module(name)
            module.add_arguments(commands.add_parser(name, help=what,
                                                     **parser_settings(module.__doc__)))
        else:
            commands.add_parser(name, help=what, add_help=False)
    return parser


def exit_code(result) -> int:
    """A command's `main` returns an exit code, or its results (a dict: success)."""
    return result if isinstance(result, int) else 0


TOP_LEVEL_OPTIONS = ("-h", "--help", "--version")


# The commands that Ctrl-C stops at once (`stop_at_once_on_interrupt`): they write nothing that
# an abrupt exit leaves half done (their outputs are renamed into place when complete; `index`
# keeps its finished chunks to resume from). Training commands keep Python's KeyboardInterrupt.
STOP_AT_ONCE = frozenset({"list", "encode", "search", "index", "evaluate", "odqa", "demo"})
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process stopped by Ctrl-C


def stop_at_once_on_interrupt(command: str) -> None:
    """Makes Ctrl-C stop the process within a moment, with one line on stderr and exit status
    130, even while TensorFlow or ScaNN runs C++ code for seconds (Python runs its own handler
    only between bytecodes, and a KeyboardInterrupt then unwinds through TensorFlow's threads and
    exit handlers: ~15 s and a long traceback). SIGINT is blocked in this thread, and so in every
    thread started after it; one daemon thread waits for it with ``sigwait`` and ends the
    process with ``os._exit``."""
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    if threading.current_thread() is not threading.main_thread() or not hasattr(
            signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def wait() -> None:
        signal.sigwait({signal.SIGINT})
        try:
            os.write(2, f"\n{PROG} {command}: interrupted\n".encode())
        finally:
            os._exit(INTERRUPTED)

    threading.Thread(target=wait, name="tt-zoo-interrupt", daemon=True).start()


def main(argv=None) -> int:
    """Runs ``tt-zoo ARGV``; returns the exit code. Output cut short by its reader (``tt-zoo
    list | head -1``) ends quietly with status 0, as the reader had what it wanted. Run as the
    process's command (`argv` None), Ctrl-C stops the commands of `STOP_AT_ONCE` within a
    moment: one line, exit status 130."""
    words = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = next((a for a in words[:1] if not a.startswith("-")), "")
    if argv is None and command in STOP_AT_ONCE:
        stop_at_once_on_interrupt(command)
    try:
        return _main(argv)
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush is silent.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no file (captured): nothing to flush
            pass
        return 0
    except KeyboardInterrupt:  # Ctrl-C in a command that stops between bytecodes
        print(f"\n{PROG} {command}: interrupted".rstrip(), file=sys.stderr)
        return INTERRUPTED


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = argv[0] if argv and not argv[0].startswith("-") else None
    if command is None and argv and argv[0] not in TOP_LEVEL_OPTIONS:
        option = argv[0].split("=", 1)[0]
        close = difflib.get_close_matches(option, TOP_LEVEL_OPTIONS, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]}?" if close else ""
        print(f"{PROG}: unknown option {option!r}.{hint} Before a command, {PROG} takes "
              f"{', '.join(TOP_LEVEL_OPTIONS)}; then 'tt-zoo COMMAND ...' ('{PROG} --help' "
              "lists the commands).", file=sys.stderr)
        return 2
    if command is not None and command not in COMMANDS:
        close = difflib.get_close_matches(command, COMMANDS, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        print(f"{PROG}: unknown command {command!r}.{hint} Commands: {', '.join(COMMANDS)} "
              f"('{PROG} --help' says what each does).", file=sys.stderr)
        return 2
    try:
        # --help, --version, a missing command or a malformed option end here; then the
        # command parses its arguments again, with the checks argparse cannot make.
        build_parser(command).parse_known_args(argv)
        return exit_code(command_module(command).main(argv[1:]))
    except SystemExit as stop:  # an exit code, or a message (exit code 1)
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
