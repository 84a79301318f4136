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


def reach_family(number):
    """Asks the kernel for socket family `number` (as a datagram, stream and
    seqpacket socket): worked when the kernel itself answered, with a
    socket or with its own refusal (no such family, no such type), since
    the kernel then looked the family up, which on a distribution kernel
    loads its module; refused only when the call was stopped before (EPERM
    or EACCES)."""
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        try:
            socket.socket(int(number), kind, 0).close()
        except OSError as e:
            if e.errno in (1, 13):
                ok(False)
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


def stat_mode(path):
    return os.stat(path).st_mode


def setuid_left(path):
    """Worked when `path` exists with the setuid or setgid bit."""
    ok(stat_mode(path) & 0o6000 != 0)


def mode_bits(how, path):
    """Creates `path` with mode 06755 or gives it that mode, one way each."""
    if how == "open":
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o6755))
    elif how == "tmpfile":
        fd = os.open(os.path.dirname(path), os.O_TMPFILE | os.O_WRONLY, 0o6755)
        src = ("/proc/self/fd/%d" % fd).encode()
        # linkat(AT_FDCWD, src, AT_FDCWD, path, AT_SYMLINK_FOLLOW)
        if libc.linkat(-100, src, -100, path.encode(), 0x400) != 0:
            ok(False)
    elif how == "mknod":
        os.mknod(path, 0o100000 | 0o6755)
    elif how == "fchmod":
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o755)
        os.fchmod(fd, 0o6755)
    elif how == "fchmodat2":
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o755))
        r = libc.syscall(452, -100, path.encode(), 0o6755, 0)  # AT_FDCWD
        if r != 0:
            ok(False)
    elif how == "openat2":
        how_ = ctypes.create_string_buffer(
            struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o6755, 0))
        fd = libc.syscall(437, -100, path.encode(), how_, 24)
        if fd < 0:
            ok(False)
    setuid_left(path)


def memory_target(who):
    """A pid whose memory to attack: a number, or `child` (a fresh one)."""
    if who == "child":
        return child(), True
    return int(who), False


def readable_mapping(pid, writable=False):
    with open("/proc/%d/maps" % pid) as maps:
        for line in maps:
            addr, perms = line.split()[:2]
            if perms[0] == "r" and (not writable or perms[1] == "w"):
                return int(addr.split("-")[0], 16)
    return None


def proc_mem(who, mode="read"):
    pid, mine = memory_target(who)
    try:
        addr = readable_mapping(pid, mode == "write")
        with open("/proc/%d/mem" % pid, "r+b" if mode == "write" else "rb", 0) as mem:
            mem.seek(addr)
            data = mem.read(8)
            if mode == "write":
                mem.seek(addr)
                mem.write(data)
        ok(len(data) == 8)
    finally:
        if mine:
            os.kill(pid, 9)


def proc_mem_write(who):
    proc_mem(who, "write")


def vm_writev():
    pid = child()
    buf = ctypes.create_string_buffer(8)
    local = ctypes.create_string_buffer(struct.pack("PN", ctypes.addressof(buf), 8))
    remote = ctypes.create_string_buffer(struct.pack("PN", 0x10000, 8))
    r = libc.syscall(311, pid, local, 1, remote, 1, 0)
    err = ctypes.get_errno()
    os.kill(pid, 9)
    # EFAULT means the call was allowed (the remote address is unmapped).
    ok(r >= 0 or err == 14)


def getfd():
    pid = child()
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    fd = libc.syscall(438, pidfd, 0, 0) if pidfd >= 0 else -1  # pidfd_getfd
    os.kill(pid, 9)
    ok(fd >= 0)


def connections(port, n):
    """Holds `n` connections to 127.0.0.1:`port` open for 3 s."""
    held = []
    for _ in range(int(n)):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", int(port)))
        except OSError:
            break
        held.append(s)
    time.sleep(3)
    ok(len(held) == int(n))


def file_capability(path):
    """Gives `path` a file capability (CAP_NET_RAW, effective)."""
    with open(path, "wb") as f:
        f.write(b"")
    # struct vfs_cap_data, revision 2: magic | effective, then
    # (permitted, inheritable) for capabilities 0-31 and 32-63.
    data = struct.pack("<IIIII", 0x02000000 | 1, 1 << 13, 0, 0, 0)
    os.setxattr(path, "security.capability", data)
    ok(len(os.getxattr(path, "security.capability")) > 0)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        globals()[cmd](*args)
    except OSError:
        ok(False)


main()
