#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""journal-receiver.py SOCKET OUT - a stand-in for journald's native socket.

Binds a datagram socket at SOCKET (what sd_journal_sendv(3) sends to:
/run/systemd/journal/socket, in the test's own mount namespace), says
"bound" on stdout, and appends every record it receives to OUT as one JSON
object per line ({"FIELD": "value", ...}), flushed at once.  It reads the
native protocol as journald does: "KEY=VALUE\\n" fields, and the binary-safe
form "KEY\\n" + a 64-bit little-endian length + the data + "\\n" (a value
with a newline); a record too large for a datagram arrives as a memfd
passed with SCM_RIGHTS.  A malformed record is written as {"_MALFORMED": ...}
so that the test fails on it instead of missing it."""
import array
import json
import os
import signal
import socket
import struct
import sys


def parse(data):
    fields = {}
    i = 0
    while i < len(data):
        nl = data.find(b"\n", i)
        if nl < 0:
            raise ValueError("field without a newline at byte %d" % i)
        eq = data.find(b"=", i, nl)
        if eq >= 0:
            key, value, i = data[i:eq], data[eq + 1:nl], nl + 1
        else:
            key = data[i:nl]
            if nl + 9 > len(data):
                raise ValueError("binary field %r without its length" % key)
            (size,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            start = nl + 9
            if start + size + 1 > len(data) or data[start + size:start + size + 1] != b"\n":
                raise ValueError("binary field %r of %d bytes is cut short" % (key, size))
            value, i = data[start:start + size], start + size + 1
        fields[key.decode()] = value.decode("utf-8", "replace")
    return fields


def main():
    path, out_path = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(path)
    os.chmod(path, 0o666)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("bound", flush=True)
    with open(out_path, "a", encoding="utf-8") as out:
        while True:
            fds = array.array("i")
            data, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
            for fd in fds:
                with os.fdopen(fd, "rb") as f:
                    f.seek(0)
                    data = f.read()
            try:
                record = parse(data)
            except ValueError as e:
                record = {"_MALFORMED": str(e)}
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
