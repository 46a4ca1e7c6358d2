"""Error types. Every message names the file, line, field, plugin or example ids.

Bad input (``InputError``) exits 2; plugin failures (``PluginError``) are recorded,
the rest of the run completes, and the process exits 1.
"""

from __future__ import annotations


class FaithbenchError(Exception):
    """Base class of every error faithbench raises on purpose."""

    exit_code = 2

    def __reduce__(self):
        # Rebuilt from its message and attributes, not through a subclass's __init__
        # (whose arguments differ from ``args``): an error raised in a worker process
        # must reach the parent intact, or the pool breaks and the error is lost.
        return _rebuild, (type(self), str(self), dict(self.__dict__))


def _rebuild(cls, message: str, state: dict) -> FaithbenchError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class InputError(FaithbenchError):
    """Malformed user input: data file, explanations file, config, CLI value."""


class DataFileError(InputError):
    """A data or explanations file is malformed; names the file, line and field."""

    def __init__(self, path, line: int | None, field: str | None, problem: str):
        self.path, self.line, self.field = str(path), line, field
        where = self.path + (f", line {line}" if line is not None else "")
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {problem}")


class NotUtf8Error(DataFileError):
    """A file holds bytes that are not UTF-8: names the line and the byte offset."""

    def __init__(self, path, line: int, offset: int, byte: int, column: int):
        self.offset = offset  # 0-based, from the start of the file
        super().__init__(path, line, None, f"byte 0x{byte:02x} at byte offset {offset} (byte "
                         f"{column} of the line) is not UTF-8; save the file as UTF-8")

    @classmethod
    def at(cls, path, data: bytes, offset: int) -> NotUtf8Error:
        """The error for ``data`` (a whole file's bytes) failing to decode at ``offset``."""
        start = data.rfind(b"\n", 0, offset) + 1
        return cls(path, data.count(b"\n", 0, offset) + 1, offset, data[offset],
                   offset - start + 1)


class UnknownNameError(InputError):
    """A registry lookup failed; the message suggests close matches."""


class PluginError(FaithbenchError):
    """An explainer plugin failed to load, raised, or returned bad output."""

    exit_code = 1

    def __init__(self, plugin: str, stage: str, problem: str, example_ids=()):
        self.plugin, self.stage, self.problem = plugin, stage, problem
        self.example_ids = tuple(str(i) for i in example_ids)
        ids = ""
        if self.example_ids:
            shown = ", ".join(self.example_ids[:8])
            more = f" (+{len(self.example_ids) - 8} more)" if len(self.example_ids) > 8 else ""
            ids = f" [examples {shown}{more}]"
        super().__init__(f"explainer {plugin!r} failed at {stage}: {problem}{ids}")


class IntegrityError(FaithbenchError):
    """A file faithbench wrote no longer matches what it recorded about it (a weights
    hash, a content hash, an estimate recomputed from its rows): changed on disk since.
    Never used; names the file and what to do."""

    def __init__(self, path, problem: str, fix: str):
        self.path = str(path)
        super().__init__(f"{path}: {problem}; it was changed after faithbench wrote it, "
                         f"so it is not used ({fix})")
