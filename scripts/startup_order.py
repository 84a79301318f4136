#!/usr/bin/env python3
"""The start-up code order of the shipped binary (scripts/build-release).

`paddock sandbox` starts once per confined command, and most of its cost
on a busy host is page faults on the 40 MB binary's text: the few hundred
functions a start runs lie scattered over about 280 pages, and the
sandbox's PID 1, a clone, faults them all in again. Placing them next to
each other (lld's --symbol-ordering-file) makes them a few dozen pages.

  startup_order.py record BINARY ADDRS... > crates/paddock/startup-order.txt
      turns addresses sampled while BINARY ran (perf's instruction
      pointers and page-fault data addresses, one hex number per line,
      from the files ADDRS) into the stable keys of the symbols holding
      them, in address order;
  startup_order.py resolve BINARY KEYS > ORDER
      lists BINARY's symbols whose key is in KEYS, in the order of KEYS,
      after the resolvers of its IRELATIVE relocations (a static glibc
      calls every one of them at each start, whatever the command runs):
      the ordering file for lld.

`record` keeps the keys already in the file named by STARTUP_ORDER_KEEP
(first, in their order) and appends the new ones: recording again on an
ordered binary finds what the samples missed the first time.

A key is a symbol's name without what changes from build to build: the
hash suffix of a Rust name (`17h<16 hex>E`) and LLVM's `.llvm.N`; LLVM's
anonymous constants (`anon.*`) have no stable name and are left out. All
instances of a generic function share a key, so all are placed together.
Keys of symbols that no longer exist are ignored: a stale list only
orders less.
"""

import bisect
import os
import re
import subprocess
import sys

HASH = re.compile(r"17h[0-9a-f]{16}E(\.llvm\.\d+)?$")
LLVM = re.compile(r"\.llvm\.\d+$")


def key(name):
    if name.startswith("anon."):
        return None
    if name.startswith("_ZN"):
        return HASH.sub("", name)
    return LLVM.sub("", name)


def symbols(binary):
    out = subprocess.run(
        ["nm", "--defined-only", "-S", binary],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        addr, size, _kind, name = parts
        syms.append((int(addr, 16), max(int(size, 16), 1), name))
    syms.sort()
    return syms


def irelative_resolvers(binary):
    """The addresses of the functions a static binary's start calls to
    resolve its IRELATIVE relocations (glibc's string functions)."""
    out = subprocess.run(
        ["readelf", "-rW", binary], check=True, capture_output=True, text=True
    ).stdout
    addrs = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "R_X86_64_IRELATIVE":
            addrs.add(int(parts[3], 16))
    return addrs


def record(binary, files):
    keep = []
    path = os.environ.get("STARTUP_ORDER_KEEP")
    if path and os.path.exists(path):
        with open(path) as f:
            keep = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    syms = symbols(binary)
    starts = [s[0] for s in syms]
    hit = {}
    for path in files:
        with open(path) as f:
            for line in f:
                try:
                    addr = int(line.strip(), 16)
                except ValueError:
                    continue
                i = bisect.bisect_right(starts, addr) - 1
                if i >= 0 and syms[i][0] <= addr < syms[i][0] + syms[i][1]:
                    k = key(syms[i][2])
                    if k is not None:
                        hit.setdefault(k, syms[i][0])
    seen = set(keep)
    for k in keep:
        print(k)
    for k, _ in sorted(hit.items(), key=lambda kv: kv[1]):
        if k not in seen:
            print(k)


def resolve(binary, keys_path):
    with open(keys_path) as f:
        keys = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    rank = {k: i for i, k in enumerate(keys)}
    resolvers = irelative_resolvers(binary)
    chosen = []
    for addr, _size, name in symbols(binary):
        k = key(name)
        if addr in resolvers:
            chosen.append((-1, addr, name))
        elif k in rank:
            chosen.append((rank[k], addr, name))
    for _, _, name in sorted(chosen):
        print(name)


def main(argv):
    if len(argv) >= 3 and argv[0] == "record":
        record(argv[1], argv[2:])
    elif len(argv) == 3 and argv[0] == "resolve":
        resolve(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
