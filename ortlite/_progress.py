"""Progress of long work (ortlite bench / run, tools/conformance.py): a tqdm bar when the
stream is a terminal and tqdm is installed (the `cli` extra), else a few plain lines.

Plain lines are for logs and pipes: one when the work starts, then at most one per tenth
of the total and per `interval` seconds, and one at the end, each a whole line.
"""

import sys
import time


def _tqdm():
    try:
        from tqdm import tqdm
    except Exception:  # not installed, or broken: progress is never worth an error
        return None
    return tqdm


class _Base:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Lines(_Base):
    def __init__(self, total, desc, unit, stream, interval):
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.interval = interval
        self.n = 0
        self.t0 = self.last_t = time.monotonic()
        self.last_n = 0
        self.closed = False
        self._write()

    def _write(self):
        seconds = time.monotonic() - self.t0
        total = f"/{self.total}" if self.total else ""
        print(f"{self.desc}: {self.n}{total} {self.unit} ({seconds:.1f} s)", file=self.stream,
              flush=True)

    def update(self, n=1):
        self.n += n
        now = time.monotonic()
        step = max(1, (self.total or 0) // 10)
        if self.total and self.n >= self.total:
            return  # close() writes the last line
        if self.n - self.last_n >= step and now - self.last_t >= self.interval:
            self.last_n, self.last_t = self.n, now
            self._write()

    def close(self):
        if not self.closed:
            self.closed = True
            self._write()


class _Bar(_Base):
    def __init__(self, bar):
        self.bar = bar

    def update(self, n=1):
        self.bar.update(n)

    def close(self):
        self.bar.close()


def progress(total, desc, unit="it", stream=None, interval=1.0):
    """An object with update(n=1) and close() (also a context manager) reporting `total`
    steps of `desc` on `stream` (default sys.stderr)."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    tqdm = _tqdm() if tty else None
    if tqdm is not None:
        try:
            return _Bar(tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False))
        except Exception:
            pass
    return _Lines(total, desc, unit, stream, interval)

