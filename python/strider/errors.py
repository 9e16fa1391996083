"""strider's errors: one class per status code, all subclasses of strider.Error.

Every failure in strider (a bad model, a wrong input, an unsupported op, a device error)
is raised as the class of its status code, with the code and the one-line message that
names what and where, as the CLI prints them.
"""


class Error(RuntimeError):
    """A strider status that is not OK: `code` ("INVALID_ARGUMENT", ...) and `message`."""

    code = "UNKNOWN"

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InvalidArgument(Error, ValueError):
    """The caller's input is wrong: a shape, a dtype, an option, a file's content."""


class InvalidModel(Error):
    """The model is malformed: truncated, a dangling value, a bad attribute."""


class Unsupported(Error):
    """The model is valid but uses something strider does not implement."""


class OutOfRange(Error, IndexError):
    """An index, view or byte range leaves its bounds."""


class NotFound(Error, FileNotFoundError):
    """A named file, input or output does not exist."""


class IoError(Error, OSError):
    """Reading or writing a file failed."""


class DeviceError(Error):
    """A device or library call failed at run time (or the device is not here)."""


class Internal(Error):
    """A bug in strider, reported without aborting."""


class Hazard(Error):
    """The sanitizer found accesses that no wait orders."""


class ResourceExhausted(Error, MemoryError):
    """The memory budget (or the machine's memory) cannot hold what is asked."""


_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgument,
    "INVALID_MODEL": InvalidModel,
    "UNSUPPORTED": Unsupported,
    "OUT_OF_RANGE": OutOfRange,
    "NOT_FOUND": NotFound,
    "IO_ERROR": IoError,
    "DEVICE_ERROR": DeviceError,
    "INTERNAL": Internal,
    "HAZARD": Hazard,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
}


def error_for(code, message):
    """The exception for a status code and message (the C++ core raises these)."""
    return _BY_CODE.get(code, Error)(code, message)
