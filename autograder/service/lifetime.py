"""A helper process of the service ends with the process that started it, even after its ``kill -9``.

Linux's ``PR_SET_PDEATHSIG``: the kernel sends ``signum`` to this process when its parent dies. If the
parent is already gone (it died before the call), the signal is raised here at once.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM, parent: int | None = None) -> None:
    """Get ``signum`` when the parent dies. ``parent``: the pid it must still be (a parent that died
    before this call left this process to PID 1 or a subreaper: it is signalled now)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    except OSError:
        return  # not Linux: nothing to tie to
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signum)
