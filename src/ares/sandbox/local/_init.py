"""Sandbox init: runs as ``python -I -S _init.py FD`` and becomes pid 1 of a fresh sandbox (or as
``python -I -S _init.py --zygote FD HOST_PID OOM_SCORE_ADJ``, the zygote that forks such inits).

This file is only the entry point; the program is the package ``init/`` beside it, by concept:
``kernel`` (libc and flag values), ``wire`` (this end of the protocol below), ``filesystem`` (the
sandbox's root and hardening), ``main`` (start-up), ``serve`` (pid 1's loop), ``commands`` (a
shepherd and its command), ``capture`` (a command's output and process tree) and ``zygote``.
It is run by path, not imported: ``-I`` keeps the host's environment and user site out, ``-S`` skips
``site``, so the package is found through the one path entry added below and imported as ``init``.
Standard library only, and every module is imported before ``pivot_root``: after the switch the
host's Python files are no longer visible, but the already-loaded interpreter keeps running.

Protocol on the inherited SOCK_SEQPACKET socket FD (one ``marshal``-encoded dict per packet: the
stdlib's own format needs no import, where json would pull in ``re`` and cost every start ~4 ms):
  host -> init   config                      init -> host  {"stage": "unshared"}
  host -> init   {"op": "fds"} + fds         (idmapped layers and scratch when root-run; repeated)
  host -> init   {"op": "mapped", ...}       (host has written uid/gid maps)
  host -> init   {"op": "limited"}           (host has put the init in the sandbox's cgroups)
                                             init -> host  {"stage": "forked", "pid": <host pid of pid 1>}
                                             init -> host  {"stage": "ready", "shell": ...}
  host -> init   {"op": "exec", ...} + fds [reply socket, stdin memfd?]
A forked "shepherd" runs each command and answers on its own reply socket: a 4-byte length, a header
dict, then stdout and stderr bytes. Closing the control socket ends the sandbox. ``Wire`` frames all
of it (``channel.py`` is the host's end; a test checks that both name the same keys).

The host puts the init in the sandbox's cgroups before pid 1 exists (so every process is limited),
with oom_score_adj -1000 inherited by pid 1 and the shepherds; commands get 500. Pid 1 keeps signals
at their default action, which the kernel does not deliver to a pid namespace's init from inside it;
a shepherd the agent kills only loses its own command's result.
"""

import os
import sys

if __name__ == "__main__":
    # -I leaves this script's directory off sys.path. Appended, so nothing here shadows a standard
    # module; importing the zygote imports every module of the init (main imports the rest).
    sys.path.append(os.path.dirname(__file__))
    from init.main import main
    from init.zygote import zygote

    if sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(int(sys.argv[1]), os.getppid())
