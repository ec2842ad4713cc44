#!/usr/bin/env bash
# vanished-files.sh MODE - the store's files vanish under a running vfhealthd
# (docs/security.md).  MODE:
#
#   wal  `rm vfhealth.db-wal vfhealth.db-shm`: the WAL holds every commit
#        since the last checkpoint, and SQLite would go on committing into
#        the unlinked file
#   db   the database file is replaced by a copy (cp; mv over it), as a
#        careless restore would: SQLite would go on writing the old inode
#   moved  the WAL is renamed away (still linked, no longer at its path):
#        told apart from a deleted one only by its link count, which the
#        daemon looks at only once the path no longer names it
#   dir-moved  the database's directory is renamed away (both files still
#        linked, neither at its path)
#   parent-moved  the directory above the database's is renamed away:
#        nothing happens to the files or to their directory
#   mounted-over  a tmpfs is mounted over the database's directory: no
#        directory changes at all, only the mount table
#
# The check is skipped while nothing it depends on could have changed
# (store/files-watch.c): parent-moved fails without the watches of the
# directories above the database's, dir-moved without those and the
# directory's own, mounted-over without the mount table's poll.
#
# Either way: the next write fails with EIO and changes nothing, `status`
# names the file and what happened, placement reads (allocatable,
# quarantined) fail with EIO; after SIGKILL and a restart every write that
# was acknowledged before (a hold, a quarantine) is still there, and the
# write refused after is not.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
mode=${1:?usage: vanished-files.sh wal|db|moved|dir-moved|parent-moved|mounted-over}
require_fuse

A=0000:41:00.1 B=0000:41:00.2 C=0000:41:00.3
# parent-moved moves $dbdir with the database's directory in it
[[ $mode != parent-moved ]] || DB=$T/db/store/vfhealth.db
dbdir=$T/db

start_daemon --threshold 2 --no-sentinel
for vf in $A $B $C; do expect ok mkdir "$MNT/$vf"; done
# Acknowledged before the files vanish: a hold on A, a quarantine of B.
expect ok write "$MNT/$A/quarantined" 1
expect "ok recorded" report "$MNT/$B/report" "failed b-1 - one"
expect "ok quarantined" report "$MNT/$B/report" "failed b-2 - two"
[[ $(vf_read "$MNT/allocatable") == "$C" ]] || fail "allocatable before: $(vf_read "$MNT/allocatable")"
[[ -e $DB-wal ]] || fail "no WAL at $DB-wal"

case $mode in
wal)
	rm "$DB-wal" "$DB-shm"
	reason_re="write-ahead log $DB-wal was deleted"
	;;
db)
	cp "$DB" "$DB.copy"
	mv "$DB.copy" "$DB"
	reason_re="database file $DB was replaced"
	;;
moved)
	mv "$DB-wal" "$DB-wal.moved"
	reason_re="write-ahead log $DB-wal was moved away"
	;;
dir-moved | parent-moved)
	mv "$dbdir" "$dbdir.moved"
	reason_re="database file $DB was moved away"
	;;
mounted-over)
	mount_tmpfs "$dbdir" 1m
	reason_re="database file $DB was moved away"
	;;
*) fail "unknown mode $mode" ;;
esac

# The next write fails and says why; nothing placement reads is served.
expect EIO write "$MNT/$C/quarantined" 1
status=$(vf_read "$MNT/status")
[[ $status == "unavailable: "*"$reason_re"* ]] || fail "$mode: status: $status"
expect EIO read "$MNT/allocatable"
expect EIO read "$MNT/quarantined"
expect EIO read "$MNT/$A/quarantined"
grep -q "store: unavailable: .*$reason_re" "$DAEMON_LOG" || fail "$mode: no log line naming the file"

kill_daemon
# the files back where they were, for the restart to find
case $mode in
dir-moved | parent-moved) mv "$dbdir.moved" "$dbdir" ;;
mounted-over)
	umount "$dbdir"
	unset 'EXTRA_MOUNTS[-1]'
	;;
esac
start_daemon --threshold 2 --no-sentinel
[[ $(vf_read "$MNT/status") == ok ]] || fail "$mode: status after restart: $(vf_read "$MNT/status")"
[[ $(vf_read "$MNT/$A/state") == held ]] || fail "$mode: the hold acknowledged before was lost"
[[ $(vf_read "$MNT/$B/quarantined") == 1 ]] || fail "$mode: the quarantine acknowledged before was lost"
[[ $(vf_read "$MNT/$B/tally") == 2 ]] || fail "$mode: tally of B: $(vf_read "$MNT/$B/tally")"
[[ $(vf_read "$MNT/quarantined") == "$A"$'\n'"$B" ]] || fail "$mode: quarantined: $(vf_read "$MNT/quarantined")"
[[ $(vf_read "$MNT/$C/quarantined") == 0 ]] || fail "$mode: the refused hold of C appeared"
[[ $(vf_read "$MNT/allocatable") == "$C" ]] || fail "$mode: allocatable after restart: $(vf_read "$MNT/allocatable")"
stop_daemon
