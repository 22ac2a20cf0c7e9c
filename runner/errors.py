"""The one error type a user ever sees: bad input, told in one line, exit code 2.

Anything that is the user's to fix (a config value, a URL, a missing file or variable)
raises UsageError with a message that names what is wrong; the CLI prints it as one line
on stderr and exits 2, never with a traceback.
"""

EXIT_OK = 0
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad configuration or command line; str(error) is the whole, single-line message."""
