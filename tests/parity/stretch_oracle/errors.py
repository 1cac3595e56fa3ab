"""InputError: the one exception the oracle raises for bad input (a file, a flag, a config key).

The message names the file or flag and says what to do; the command-line scripts print it as
`<script>: error: <message>` and exit 2 (usage / input), never with a traceback.
"""


class InputError(Exception):
    """Bad input: `what` (file, flag, key), what is wrong, and a hint."""

    def __init__(self, what: str, problem: str, hint: str = ""):
        msg = f"{what}: {problem}"
        if hint:
            msg += f" (hint: {hint})"
        super().__init__(msg)
