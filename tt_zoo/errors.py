"""The one error type for tt_zoo artifacts on disk."""


class ArtifactError(ValueError):
    """A saved artifact (model export, index, retrieve SavedModel) is missing, incomplete, or
    does not match its recorded sha256; the message names the file."""
