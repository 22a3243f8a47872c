"""Loopback listener helper: runs as ``python -I -S _listen.py REPLY_FD NET_FD PORT`` (stdlib only).

Joins the network namespace NET_FD, creates a TCP socket listening on 127.0.0.1:PORT there and
passes it back over the unix socket REPLY_FD (SCM_RIGHTS), then exits. A socket keeps the namespace
it was made in, so the host serves a port that exists only inside the sandbox.

It is a separate process because joining a namespace owned by another user namespace means joining
that user namespace first (an unprivileged host user has no capability over the netns otherwise),
and a multi-threaded process such as the host may not change its user namespace. Root joins the
netns directly. It joins no pid or mount namespace, so no sandbox process can see or signal it.

Reply: one marshal-encoded dict, ``{"port": N}`` with the socket's fd, or ``{"error": message}``.
"""

import ctypes
import fcntl
import marshal
import os
import socket
import sys

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace that owns a namespace
PR_SET_DUMPABLE = 4

libc = ctypes.CDLL(None, use_errno=True)


def setns(fd: int, nstype: int) -> None:
    if libc.setns(fd, nstype) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def join(net_fd: int) -> None:
    """Enter the netns ``net_fd``, through its owning user namespace when we lack the capability."""
    try:
        setns(net_fd, CLONE_NEWNET)
        return
    except PermissionError:
        pass
    user_fd = fcntl.ioctl(net_fd, NS_GET_USERNS)
    try:
        setns(user_fd, CLONE_NEWUSER)
    finally:
        os.close(user_fd)
    setns(net_fd, CLONE_NEWNET)


def listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def main(reply_fd: int, net_fd: int, port: int) -> None:
    reply = socket.socket(fileno=reply_fd)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace or /proc/<pid>/fd of this process by others
    try:
        join(net_fd)
    except OSError as exc:
        reply.send(marshal.dumps({"error": f"cannot join its network namespace: {exc.strerror or exc}"}))
        return
    os.close(net_fd)
    try:
        sock = listen(port)
    except OSError as exc:
        reply.send(marshal.dumps({"error": f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"}))
        return
    socket.send_fds(reply, [marshal.dumps({"port": sock.getsockname()[1]})], [sock.fileno()])


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
