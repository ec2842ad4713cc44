#!/usr/bin/env bash
# lock-symlink.sh - links planted where root creates the store's files
# (docs/security.md).  Root never opens the `-lock` file through a symlink:
# one pointing at a file elsewhere does not make root create that file, one
# pointing at a file a user holds flock on does not keep the daemon from
# starting; either way the daemon serves, unavailable, with a status that
# says to remove the link, and `echo repair > status` works once it is
# gone.  A database directory group or others may write is refused with a
# status saying what to do.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
require_fuse
require_cmd setpriv:util-linux flock:util-linux

dbdir=$T/db
DB=$dbdir/vfhealth.db
mkdir -m 0700 "$dbdir"
status() { vf_read "$MNT/status"; }

# -- a symlink to a file that does not exist yet, elsewhere
mkdir -m 0755 "$T/elsewhere"
ln -s "$T/elsewhere/victim" "$DB-lock"
start_daemon --no-sentinel
[[ ! -e $T/elsewhere/victim ]] || fail "root created the file the planted -lock link points at"
[[ $(status) == "unavailable: cannot open $DB-lock: "*"symbolic link: remove it"* ]] ||
	fail "status with a planted -lock link: $(status)"
[[ $(vfio read "$MNT/allocatable") == EIO ]] || fail "allocatable served without the lock"
rm "$DB-lock"
[[ $(vfio write "$MNT/status" repair) == ok ]] || fail "repair once the link is gone"
[[ $(status) == ok ]] || fail "status after repair: $(status)"
[[ -f $DB-lock && ! -L $DB-lock ]] || fail "no lock file of our own after repair"
stop_daemon
rm -f "$DB" "$DB".* "$DB"-*

# -- a symlink to a file a user holds flock on
mkdir -m 0777 "$T/user"
touch "$T/user/held"
chmod 0666 "$T/user/held"
mkfifo "$T/flock.out"
exec {holder}<>"$T/flock.out"
# one process (setpriv execs sh execs sleep) holds the lock: the harness's
# kill of it at exit ends it
# shellcheck disable=SC2016 # $1 is the inner shell's
background setpriv --reuid=65534 --regid=65534 --clear-groups \
	sh -c 'exec 9<"$1" && flock -n 9 && echo locked && exec sleep 600' sh "$T/user/held" \
	>"$T/flock.out"
read -r -t 60 -u "$holder" line || line=nothing
[[ $line == locked ]] || fail "the user's flock did not start ($line)"
ln -s "$T/user/held" "$DB-lock"
start_daemon --no-sentinel
[[ $(status) == "unavailable: cannot open $DB-lock: "*"symbolic link: remove it"* ]] ||
	fail "status with a -lock link to a held file: $(status)"
[[ ! -s $T/user/held ]] || fail "the held file was written"
stop_daemon
rm -f "$DB-lock"

# -- a database directory group or others may write
shared=$T/shared
mkdir -m 0775 "$shared"
DB=$shared/vfhealth.db
start_daemon --no-sentinel
[[ $(status) == "unavailable: the directory of $DB is writable by group or others"*"chmod go-w"* ]] ||
	fail "status with a group-writable database directory: $(status)"
[[ ! -e $DB-lock && ! -e $DB ]] || fail "files created in a group-writable directory"
chmod go-w "$shared"
[[ $(vfio write "$MNT/status" repair) == ok ]] || fail "repair once the directory is private"
[[ $(status) == ok ]] || fail "status after chmod go-w: $(status)"
stop_daemon
