"""hugepages.py - run this Python process with glibc's malloc on huge pages.

The PyTorch references of the long-context cases allocate float64 tensors of
100 MB and more, each fresh from mmap. On the virtual machines CI runs on, a
4 KiB page fault costs microseconds, and one 2,048-query case took 14 s to
build, 4 s with malloc's blocks advised as transparent huge pages (glibc's
tunable glibc.malloc.hugetlb=1, glibc 2.35 and later; older glibc ignores
it). The tunable is read when a process starts, so reexec() runs the script
again once with it set, then puts the environment back as it was, so that
the programs the script starts (the daemon, the test binaries) run with
the allocator they ship with. Call it before anything heavy is imported.
It changes where memory comes from, never a value.
"""

import os
import sys

_MARK = "ATTN_HUGEPAGES_SAVED_TUNABLES"


def reexec():
    env = os.environ
    if _MARK in env:  # the second start: tunable read; restore the caller's environment
        saved = env.pop(_MARK)
        if saved:
            env["GLIBC_TUNABLES"] = saved
        else:
            env.pop("GLIBC_TUNABLES", None)
        return
    saved = env.get("GLIBC_TUNABLES", "")
    new = dict(env)
    new[_MARK] = saved
    new["GLIBC_TUNABLES"] = saved + (":" if saved else "") + "glibc.malloc.hugetlb=1"
    os.execve(sys.executable, [sys.executable] + sys.argv, new)
