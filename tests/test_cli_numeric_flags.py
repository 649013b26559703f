"""Every numeric flag of every tt-zoo command, fuzzed with nan, inf, -1, 0 and a huge value: a
bad one is argparse's usage error naming the flag, at parse time; a good one is taken as given
(0 is a number, never "not given"). Parsing only: no data is read, nothing is trained."""

import contextlib
import io
import json

import pytest

from tt_zoo.cli import COMMANDS, build_parser
from tt_zoo.numbers import Number

VALUES = ("nan", "inf", "-1", "0", "1e300", str(10**30))


def _subparser(command):
    parser = build_parser(command)
    return next(a for a in parser._actions if a.dest == "command").choices[command]


def _numeric_flags(command):
    """(flag spellings, type) of each option of `command` whose values are numbers."""
    return [(action.option_strings, action.type) for action in _subparser(command)._actions
            if action.option_strings and (isinstance(action.type, Number)
                                          or action.type in (int, float))]


def _parse(command, flag, value):
    """argparse's exit status and message for ``tt-zoo COMMAND FLAG VALUE`` (None: parsed)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            build_parser(command).parse_known_args([command, flag, value])
        except SystemExit as stop:
            return stop.code, err.getvalue()
    return None, ""


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_numeric_flag_is_checked_when_parsed(command):
    flags = _numeric_flags(command)
    unchecked = [names for names, kind in flags if not isinstance(kind, Number)]
    assert not unchecked, f"tt-zoo {command}: numeric flags without a range: {unchecked}"
    for names, number in flags:
        flag = names[-1]
        for value in VALUES:
            status, message = _parse(command, flag, value)
            as_number = float(value)
            refused = number.problem(int(value) if value.lstrip("-").isdigit()
                                     else as_number) is not None
            if value in ("nan", "inf", "1e300", str(10**30), "-1"):
                assert refused, f"{command} {flag} {value}: its range takes it"
            if refused:
                assert status == 2, f"tt-zoo {command} {flag} {value} was accepted"
                assert f"argument {'/'.join(names)}: must be" in message, message
                assert "usage:" in message
            else:  # taken as given, 0 as 0 (a required flag missing may still stop the parse)
                assert f"argument {'/'.join(names)}" not in message, message
                assert number(value) == as_number and number(value) is not None


def test_the_bad_values_of_the_report_are_refused_naming_their_flag():
    """The settings that once trained to NaN, trained at another batch or ended in a traceback
    naming an internal."""
    for argv in (["--learning-rate", "nan"], ["--learning-rate", "inf"],
                 ["--learning-rate", "-1"], ["--temperature", "-1"], ["--query-length", "0"],
                 ["--max-pairs", "-1"], ["--batch-size", "0"], ["--steps", "-5"],
                 ["--checkpoint-every", "0"], ["--warmup-fraction", "5"], ["--dropout", "2"]):
        status, message = _parse("pretrain", *argv)
        assert status == 2 and f"argument {argv[0]}: must be" in message, argv


def test_a_config_file_is_held_to_the_same_ranges(tmp_path):
    """A --config file's number (JSON's NaN included) is checked like the flag."""
    from tt_zoo.cli import pretrain
    for group, key, value in (("training", "learning_rate", float("nan")),
                              ("training", "batch_size", 0), ("model", "dropout", 2.0)):
        path = tmp_path / "run.json"
        path.write_text(json.dumps({group: {key: value}}))  # Python writes NaN as NaN
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
            pretrain.parse_args(["--config", str(path), "--variant", "none_512"])
        assert f"'{group}.{key}' must be" in err.getvalue(), err.getvalue()


def test_zero_is_a_value_not_a_default():
    """A 0 the range allows reaches the run as 0: the schedule keeps --steps 0 and
    --warmup-fraction 0, never the recipe's."""
    from tt_zoo.cli import pretrain
    from tt_zoo.training.pretrain_run import resolve_schedule
    from tt_zoo.zoo import registry
    spec = registry.get_spec("ict_bfs_wlp_128")
    config = pretrain.parse_args(["--variant", spec.name, "--steps", "0",
                                  "--warmup-fraction", "0", "--batch-size", "3"])
    schedule = resolve_schedule(spec, config.training)
    assert (schedule.steps, schedule.warmup_fraction, schedule.batch_size) == (0, 0.0, 3)
