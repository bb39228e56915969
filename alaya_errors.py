"""The one exception type for mistakes a user can make (a bad file, schedule, request or engine message).

Every package raises a subclass of `UserError` with a one-line message that names what is wrong
(the file, the segment, the field). The CLI turns it into `error: ...` and exit code 2, the API into
HTTP 4xx with a JSON body. Anything else that escapes is a bug and may show a traceback.
"""


class UserError(ValueError):
    """A one-line, user-facing error. `where` names the file, field or message that was wrong."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        self.detail = message
        super().__init__(f"{where}: {message}" if where else message)
