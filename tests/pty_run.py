"""Run a command in a pseudo-terminal of a given width, as a user's shell would: what it printed, as text."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_in_a_pty(command: Sequence[str], cwd: Path, env: Mapping[str, str], columns: int | None = None) -> str:
    """``command``'s output in a pty ``columns`` wide (its own size when ``None``), until it exits."""
    primary, secondary = pty.openpty()
    if columns:
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(command, cwd=cwd, stdin=secondary, stdout=secondary, stderr=secondary, env=dict(env))
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=600)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", errors="replace")
