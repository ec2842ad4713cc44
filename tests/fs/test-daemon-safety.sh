#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The daemon and its database under failure:
#  - a second vfhealthd on a live mount exits 1 naming it, and the first
#    still serves (placement still sees its quarantine set);
#  - a second vfhealthd on a hard link of the database never becomes a writer;
#  - READY=1 carries STATUS=store available|unavailable: REASON, and every
#    availability transition sends one new STATUS= line;
#  - during an outage, 300 reads by an unprivileged user run no repair and
#    add almost nothing to the log; root's reads repair at most once a second;
#  - an emptied, a garbage or a missing-but-marked database is refused (fail
#    closed, the reason in status) and left as it was; removing the mark
#    starts afresh on purpose.
# (An external unmount exiting 1 is in test-lifecycle.sh.)
source "$(dirname "$0")/lib.sh"
require_fuse
mount_tmpfs "$T/db" 2m 0700
DAEMON_NOTIFY_LOG=$T/status.log
: >"$DAEMON_NOTIFY_LOG"

V=$MNT/0000:41:00.4
W=$MNT/0000:41:00.5
vfhealth_mounts() { awk -v m="$MNT" '$5 == m && / - fuse\.vfhealth / { n++ } END { print n + 0 }' /proc/self/mountinfo; }
metric() { awk -v want="$1" '$1 == want { print $2 }' <(cat "$MNT/metrics"); }
status_lines() { grep -c '^status ' "$DAEMON_NOTIFY_LOG" || true; }

# --- a new database: READY=1 says it is available; the mark is written
start_daemon
assert_eq "$DAEMON_STATUS" "store available" "STATUS= with READY=1"
[[ -s $DB.created ]] || fail "no mark $DB.created after creating the database"
assert_match "$(cat "$DB.created")" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "the mark's creation time"
mkdir "$V" "$W"
put "$V/quarantined" 1
assert_cat "$MNT/quarantined" 0000:41:00.4

# --- rule 8: a second daemon on the live mount is refused, the first serves on
rc=0
timeout 60 "$VFHEALTHD" -f --no-sentinel --db "$T/other/vfhealth.db" "$MNT" >"$T/second.log" 2>&1 || rc=$?
assert_eq "$rc" 1 "exit status of a second vfhealthd on a live mount"
grep -q "live vfhealth mount" "$T/second.log" && grep -qF "$MNT" "$T/second.log" ||
	fail "the refusal does not name the live mount: $(cat "$T/second.log")"
[[ ! -e $T/other/vfhealth.db ]] || fail "the refused daemon created its database"
assert_eq "$(vfhealth_mounts)" 1 "vfhealth mounts on $MNT"
assert_cat "$MNT/quarantined" 0000:41:00.4
assert_cat "$MNT/status" ok
check_sanitizers "$T/second.log"

# --- rule 10: a hard link of the database does not make a second writer
mkdir -p "$T/db/linked"
ln "$DB" "$T/db/linked/vfhealth.db"
rc=0
timeout 60 "$VFHEALTHD" -f --no-sentinel --db "$T/db/linked/vfhealth.db" "$T/mnt2" >"$T/link.log" 2>&1 || rc=$?
assert_eq "$rc" 1 "exit status of a second vfhealthd on a hard link of the database"
grep -q "held by another process" "$T/link.log" || fail "no reason for the refusal: $(cat "$T/link.log")"
! is_mounted "$T/mnt2" || fail "the refused daemon left a mount"
rm "$T/db/linked/vfhealth.db"
check_sanitizers "$T/link.log"
put "$MNT/threshold" 3 # the first is still the writer
assert_cat "$MNT/threshold" 3

# --- rule 8: the store's availability goes to $NOTIFY_SOCKET on every change
wait_for 10 "the READY=1 status line" grep -q '^status store available$' "$DAEMON_NOTIFY_LOG"
assert_eq "$(status_lines)" 1 "STATUS= lines before the outage"
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
expect_err "$EIO" put "$W/quarantined" 1
wait_for 10 "STATUS=store unavailable" grep -q '^status store unavailable: .*\(full\|space\)' "$DAEMON_NOTIFY_LOG"

# --- rule 7: an unprivileged reader loop runs no repair and logs nothing
repairs_before=$(metric vfhealth_store_repairs_total)
log_before=$(wc -l <"$DAEMON_LOG")
as_user 65534 sh -c '
	for i in $(seq 100); do
		cat "$1/quarantined" "$1/0000:41:00.4/quarantined" 2>/dev/null && exit 9
		cat "$1/resources" >/dev/null || exit 8
	done; exit 0' sh "$MNT" || fail "an unprivileged read did not fail closed ($?)"
assert_eq "$(metric vfhealth_store_repairs_total)" "$repairs_before" "repairs run for an unprivileged reader"
log_added=$(($(wc -l <"$DAEMON_LOG") - log_before))
((log_added <= 2)) || fail "300 unprivileged reads added $log_added log lines: $(tail -n 5 "$DAEMON_LOG")"
assert_match "$(as_user 65534 cat "$MNT/resources")" $'\nallocatable_slots 0\n.*\nplacement_disabled_reason ' "resources for an unprivileged reader"
# root's reads retry, at most once a second
start_us=${EPOCHREALTIME//[.,]/}
for i in $(seq 100); do
	cat "$MNT/quarantined" 2>/dev/null && fail "a read while the disk is full succeeded"
done
secs=$(((${EPOCHREALTIME//[.,]/} - start_us) / 1000000 + 1))
repairs=$(($(metric vfhealth_store_repairs_total) - repairs_before))
((repairs >= 1 && repairs <= secs)) || fail "$repairs repairs in ${secs}s of root reads (want 1..$secs)"
log_added=$(($(wc -l <"$DAEMON_LOG") - log_before))
((log_added <= 2)) || fail "the outage's reads added $log_added log lines: $(tail -n 5 "$DAEMON_LOG")"
assert_eq "$(status_lines)" 2 "STATUS= lines during the outage (one per transition)"
echo "measured: 300 unprivileged reads ran 0 repairs; 100 root reads in ${secs}s ran $repairs; the outage logged $log_added lines"

# the disk has room again: resources retries like the other placement reads
rm "$T/db/fill"
wait_for 10 "resources to retry the store" sh -c '! grep -q placement_disabled_reason "$1"' sh "$MNT/resources"
assert_cat "$MNT/status" ok
wait_for 10 "STATUS=store available again" sh -c '[ "$(tail -n 1 "$1")" = "status store available" ]' sh "$DAEMON_NOTIFY_LOG"
assert_eq "$(status_lines)" 3 "STATUS= lines after the outage"
assert_cat "$MNT/quarantined" 0000:41:00.4
stop_daemon

# --- rule 9: an emptied database is refused and left empty
cp "$DB" "$T/good.db"
rm -f "$DB-wal" "$DB-shm"
truncate -s 0 "$DB"
start_daemon
assert_match "$DAEMON_STATUS" "^store unavailable: .*empty" "STATUS= of an emptied database"
assert_match "$(cat "$MNT/status")" "^unavailable: .*$DB is empty" "status of an emptied database"
expect_err "$EIO" cat "$MNT/quarantined"
expect_err "$EIO" put "$MNT/status" repair
stop_daemon
[[ -f $DB && ! -s $DB ]] || fail "the emptied database was written: $(stat -c %s "$DB") bytes"

# --- a file that is not a vfhealth database: refused, byte for byte untouched
head -c 16384 /dev/urandom >"$T/garbage"
cp "$T/garbage" "$DB"
start_daemon
assert_match "$DAEMON_STATUS" "^store unavailable: " "STATUS= of a garbage database"
assert_match "$(cat "$MNT/status")" "^unavailable: " "status of a garbage database"
expect_err "$EIO" cat "$MNT/quarantined"
stop_daemon
cmp -s "$T/garbage" "$DB" || fail "the garbage database was modified"

# --- a missing database whose mark says one existed: refused, not recreated
rm "$DB"
start_daemon
assert_match "$(cat "$MNT/status")" "^unavailable: .*$DB is missing but $DB.created says" "status of a lost database"
expect_err "$EIO" put "$MNT/status" repair
[[ ! -e $DB ]] || fail "a lost database was recreated"
# The operator restores it: repair opens it, the quarantine is back.
cp "$T/good.db" "$DB"
put "$MNT/status" repair
assert_cat "$MNT/quarantined" 0000:41:00.4
stop_daemon

# --- starting afresh on purpose (docs/runbook.md): remove the mark and the db
rm "$DB" "$DB.created"
start_daemon
assert_eq "$DAEMON_STATUS" "store available" "STATUS= of a database started afresh"
assert_cat "$MNT/quarantined" ""
[[ -s $DB.created ]] || fail "no new mark"
stop_daemon
echo "ok"
