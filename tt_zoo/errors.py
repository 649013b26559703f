"""tt_zoo's errors: one base, `TtZooError`, and `ArtifactError` for anything on disk that is
corrupt or incomplete. Each message names the input and what was expected.

Both subclass ValueError, so code written against the ValueErrors raised before keeps working.
"""


class TtZooError(ValueError):
    """Base of every error tt_zoo raises for a bad input, setting or file."""


class ArtifactError(TtZooError):
    """A saved artifact (model export, index, retrieve SavedModel, pair directory) is missing,
    incomplete, or does not match its recorded sha256; the message names the file."""


class DownloadError(TtZooError):
    """A shipped model's files could not be fetched (offline, unreachable host, HTTP error);
    the message names the URL that failed and the folder where the files may be placed by
    hand."""


class StageError(TtZooError):
    """A stage of `tt_zoo.reproduction`'s grid could not go on: a step it runs as a process
    failed, or a model could not be shipped; the message names the stage and what failed."""


class UnknownModelError(TtZooError, KeyError):
    """A model name that is not registered; the message suggests close matches. Also a
    KeyError (what an unknown name raised before), whose message prints as written rather than
    quoted as a KeyError's key is."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""
