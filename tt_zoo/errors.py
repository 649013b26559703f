"""tt_zoo's errors: one base, `TtZooError`, and `ArtifactError` for anything on disk that is
corrupt or incomplete. Each message names the input and what was expected.

Both subclass ValueError, so code written against the ValueErrors raised before keeps working.
"""


class TtZooError(ValueError):
    """Base of every error tt_zoo raises for a bad input, setting or file."""


class ArtifactError(TtZooError):
    """A saved artifact (model export, index, retrieve SavedModel, pair directory) is missing,
    incomplete, or does not match its recorded sha256; the message names the file."""
