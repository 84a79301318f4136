"""Attack primitives for the sandbox escape suite (tests/escape.rs).

Each subcommand attempts one thing and exits 0 when it worked, 1 when the
kernel refused it. The suite runs every probe unconfined (the positive twin:
it must work) and inside `paddock sandbox` (it must not).
"""
import ctypes
import os
import socket
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def ok(cond):
    sys.exit(0 if cond else 1)


def tcp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect((host, int(port)))
    ok(True)


def listen_connect(host):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind((host, 80))
    srv.listen(1)
    tcp(host, 80)


def loopback():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    tcp("127.0.0.1", srv.getsockname()[1])


def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"ping", (host, int(port)))
    data, _ = s.recvfrom(16)
    ok(data == b"ping")


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(path)
    ok(True)


def abstract(name):
    unix("\0" + name)


def family(name):
    fams = {
        "netlink": (socket.AF_NETLINK, socket.SOCK_RAW, 0),
        "packet": (socket.AF_PACKET, socket.SOCK_RAW, 0),
        "vsock": (socket.AF_VSOCK, socket.SOCK_STREAM, 0),
        "raw": (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    }
    f, t, p = fams[name]
    socket.socket(f, t, p)
    ok(True)


def child():
    pid = os.fork()
    if pid == 0:
        time.sleep(10)
        os._exit(0)
    return pid


def ptrace():
    pid = child()
    r = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    os.kill(pid, 9)
    ok(r == 0)


def vm_readv():
    pid = child()
    buf = ctypes.create_string_buffer(8)
    iov = struct.pack("PN", ctypes.addressof(buf), 8)
    local = ctypes.create_string_buffer(iov)
    remote = ctypes.create_string_buffer(struct.pack("PN", 0x10000, 8))
    r = libc.syscall(310, pid, local, 1, remote, 1, 0)
    err = ctypes.get_errno()
    os.kill(pid, 9)
    # EFAULT means the call was allowed (the remote address is unmapped).
    ok(r >= 0 or err == 14)


def io_uring():
    params = ctypes.create_string_buffer(120)
    ok(libc.syscall(425, 8, params) >= 0)


def keyctl():
    ok(libc.syscall(250, 0, -3, 1) >= 0)  # KEYCTL_GET_KEYRING_ID, session, create


def bpf():
    attr = ctypes.create_string_buffer(struct.pack("IIII", 2, 4, 4, 1) + b"\0" * 112)
    ok(libc.syscall(321, 0, attr, 128) >= 0)  # BPF_MAP_CREATE, array map


def perf():
    attr = ctypes.create_string_buffer(struct.pack("IIQ", 1, 128, 0) + b"\0" * 112)
    ok(libc.syscall(298, attr, 0, -1, -1, 0) >= 0)  # software cpu-clock, self


def mount(target):
    r = libc.mount(b"none", target.encode(), b"tmpfs", 0, None)
    if r == 0:
        libc.umount2(target.encode(), 0)
    ok(r == 0)


def fork_bomb(n):
    pids = []
    try:
        for _ in range(int(n)):
            pid = os.fork()
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            pids.append(pid)
    except OSError:
        ok(False)
    finally:
        for p in pids:
            os.kill(p, 9)
    ok(True)


def memory_bomb(mb):
    block = b"x" * (int(mb) * 1024 * 1024)
    ok(len(block) > 0)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        globals()[cmd](*args)
    except OSError:
        ok(False)


main()
