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
