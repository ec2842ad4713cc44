#!/usr/bin/env python3
"""watch_quarantined.py - a placement watcher that waits with poll(2) on
/run/vfhealth/quarantined, the way one waits on a sysfs attribute: open the
file once, read it, poll for POLLPRI|POLLERR, and on each wake-up read it
again from offset 0.  Standard library only.

    watch_quarantined.py [--mount DIR] [--changes N]

Prints one line whenever the set changes, the first one at start:
    quarantined 0000:41:00.4 0000:41:00.5     (the whole set, sorted)
    unavailable: [Errno 5] Input/output error (fail closed: place nothing)
--changes N exits 0 after N changes (after the first line); without it the
watcher runs until the mount goes away, then exits 1.

Use it as a library: QuarantineWatcher(mount).wait() returns the new set
(a frozenset), or raises OSError when the store is unavailable.
"""

import argparse
import os
import select
import sys

# The file lists at most the store's VF cap (65536 VFs of 13 bytes); read
# at most that much so a broken mount cannot make us buffer without end.
READ_LIMIT = 65536 * 13


class QuarantineWatcher:
    def __init__(self, mount="/run/vfhealth"):
        self.path = os.path.join(mount, "quarantined")
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLPRI | select.POLLERR)

    def close(self):
        os.close(self.fd)

    def read(self):
        """The current set.  Reading from offset 0 also re-arms the poll."""
        data = os.pread(self.fd, READ_LIMIT, 0)
        return frozenset(data.decode("ascii").split())

    def wait(self, timeout_ms=None):
        """Block until vfhealthd says the file changed; return the new set.
        Returns None on timeout."""
        while True:
            events = self.poller.poll(timeout_ms)
            if not events:
                return None
            for _fd, revents in events:
                if revents & (select.POLLNVAL | select.POLLHUP):
                    raise OSError("poll: %s went away" % self.path)
                if revents & (select.POLLPRI | select.POLLERR):
                    return self.read()


def describe(result):
    if isinstance(result, OSError):
        return "unavailable: %s" % result
    return " ".join(["quarantined"] + sorted(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mount", default="/run/vfhealth")
    parser.add_argument("--changes", type=int, default=0,
                        help="exit after this many changes (0: run until the mount goes away)")
    args = parser.parse_args()

    try:
        watcher = QuarantineWatcher(args.mount)
    except OSError as e:
        print("watch_quarantined: %s" % e, file=sys.stderr)
        return 1

    def current():
        try:
            return watcher.read()
        except OSError as e:
            return e

    last = current()
    print(describe(last), flush=True)
    changes = 0
    while True:
        try:
            if isinstance(last, OSError):
                # A failed read does not re-arm the poll; retry once a second
                # until the store is back (echo repair > status).
                watcher.wait(1000)
                now = watcher.read()
            else:
                now = watcher.wait()
        except OSError as e:
            # EIO from a latched-unavailable store is a state, not the end;
            # ENOTCONN / ENODEV is the daemon going away.
            if e.errno not in (None, 5):
                print("watch_quarantined: %s" % e, file=sys.stderr)
                return 1
            now = e
        if describe(now) == describe(last):
            continue
        last = now
        print(describe(now), flush=True)
        changes += 1
        if args.changes and changes >= args.changes:
            return 0


if __name__ == "__main__":
    sys.exit(main())
