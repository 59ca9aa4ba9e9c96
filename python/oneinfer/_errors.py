"""oneinfer.Error: what the library's errors are raised as."""


class Error(RuntimeError):
    """An error the oneinfer library reported.

    str(error) is the library's message; `code` is its status code name ("INVALID_ARGUMENT",
    "NOT_FOUND", "UNIMPLEMENTED", "FAILED_PRECONDITION", ...).
    """

    code = "UNKNOWN"
