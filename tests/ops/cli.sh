#!/usr/bin/env bash
# cli.sh - what each program says about its command line agrees with what
# it does: every option its --help lists is accepted by its
# parser and no other is (every long option any of the programs or man
# pages names, every short letter); each exit status its man page documents
# is driven here, and each refusal says why; every number --help gives as
# an option's default is the one its man page gives; a vfhealthd without the
# privilege to mount says to run it as root.  Skips (77) only without FUSE.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

declare -A USAGE_STATUS=([vfhealthd]=2 [vfhealth-sentinel]=2 [vfhealth-agent]=2)
declare -A BIN=([vfhealthd]=$VFHEALTHD [vfhealth-sentinel]=$VFHEALTH_SENTINEL
	[vfhealth-agent]=$VFHEALTH_AGENT)

# run PROGRAM ARGS...: sets RC and OUT (stdout and stderr); never starts
# anything that lives on (every call below ends at --help or an error).
run() {
	local prog=$1
	shift
	RC=0
	OUT=$(timeout 20 "${BIN[$prog]}" "$@" 2>&1 </dev/null) || RC=$?
}

# expect PROGRAM RC PATTERN ARGS...: exit status RC and a message matching PATTERN.
expect() {
	local prog=$1 want=$2 pattern=$3
	shift 3
	run "$prog" "$@"
	((RC == want)) || fail "$prog $* exited $RC, want $want: $OUT"
	grep -qE -- "$pattern" <<<"$OUT" || fail "$prog $* said '$OUT', want /$pattern/"
	pass "$prog $*: exit $want, /$pattern/"
}

# options PROGRAM: "SHORT LONG METAVAR" per option its --help lists ("-" for none).
options() {
	local line re='^[[:space:]]+(-([[:alnum:]])(, )?)?(--([a-z][a-z0-9-]*))?( ([A-Z][^[:space:]]*))?'
	run "$1" --help
	((RC == 0)) || fail "$1 --help exited $RC"
	while IFS= read -r line; do
		[[ $line =~ $re ]] || continue
		[[ -n ${BASH_REMATCH[2]}${BASH_REMATCH[5]} ]] || continue
		echo "${BASH_REMATCH[2]:--} ${BASH_REMATCH[5]:--} ${BASH_REMATCH[7]:--}"
	done <<<"$OUT"
}

# sample PROGRAM LONG METAVAR: a value the option accepts.
sample() {
	case $2:$3 in
	sentinel-program:*) echo "$VFHEALTH_SENTINEL" ;;
	nvidia-smi:*) echo /bin/true ;;
	kmsg:*) echo /dev/null ;;
	# A valid rules file (the agent refuses a bad one with its line number).
	rules:*) printf 'failure GPU has fallen off the bus\n' >"$T/rules"; echo "$T/rules" ;;
	group:*) echo root ;;
	register:*) echo manual ;;
	*:PATH) echo "$T/some-file" ;;
	*:DIR) echo "$T" ;;
	*:N) echo 3 ;;
	*:S) echo 0.5 ;;
	*:EP) echo "unix:$T/agent.sock" ;;
	*:OPT*) echo ro ;;
	*:TARGET) echo stderr ;;
	*) fail "$1 --help: no sample value for --$2 $3" ;;
	esac
}

echo "== every option --help lists is accepted, and no other"
mkdir -p "$T/db"
all_long=()
for prog in vfhealthd vfhealth-sentinel vfhealth-agent; do
	while read -r short long _; do
		[[ $long == - ]] || all_long+=("--$long")
	done < <(options "$prog")
done
# ... and every long option the man pages name.
while IFS= read -r opt; do
	all_long+=("$opt")
done < <(sed 's/\\-/-/g' "$source_root"/docs/man/*.[58] | grep -ohE -- '--[a-z][a-z0-9-]*')
all_long+=(--bogus-option)
mapfile -t all_long < <(printf '%s\n' "${all_long[@]}" | sort -u)

for prog in vfhealthd vfhealth-sentinel vfhealth-agent; do
	declare -A listed=()
	n=0
	while read -r short long metavar; do
		n=$((n + 1))
		opts=()
		[[ $short == - ]] || opts+=("-$short")
		[[ $long == - ]] || opts+=("--$long")
		for opt in "${opts[@]}"; do
			listed[$opt]=1
			case $opt in
			-h | --help | -V | --version)
				expect "$prog" 0 "$prog|Usage" "$opt"
				continue
				;;
			esac
			args=("$opt")
			[[ $metavar == - ]] || args+=("$(sample "$prog" "$long" "$metavar")")
			if [[ $long == counters-fd ]]; then
				# Checked at once: descriptor 3 is no counter table.
				expect "$prog" 2 "--counters-fd" "${args[@]}" --help
				continue
			fi
			expect "$prog" 0 "^Usage: $prog" "${args[@]}" --help
		done
	done < <(options "$prog")
	((n >= 6)) || fail "$prog --help lists only $n options"
	for opt in "${all_long[@]}" $(printf -- '-%s ' {a..z} {A..Z} {0..9}); do
		[[ -z ${listed[$opt]:-} ]] || continue
		# A second --help: an option that took the first as its argument
		# still ends at help (exit 0), which fails the check below.
		expect "$prog" "${USAGE_STATUS[$prog]}" "unrecognized option|invalid option" \
			"$opt" --help --help
	done
	unset listed
done

echo "== every number --help gives as a default is its man page's"
# man_paragraph PAGE OPTION: the text of OPTION's paragraph in PAGE, on one
# line (roff's \- and \: undone): from the .B/.BI line right after a .TP
# that names it to the next macro that starts another (.TP, .SH, .SS, .PP);
# awk reads to the end, so that sed never writes into a closed pipe.
man_paragraph() {
	sed 's/\\-/-/g; s/\\://g' "$1" | awk -v opt="$2" '
		prev == ".TP" && !done && $0 ~ "^\\.B[IR]? +" opt "([ \"]|$)" { on = 1; prev = $0; next }
		on && /^\.(TP|SH|SS|PP)/ { on = 0; done = 1 }
		on { printf "%s ", $0 }
		{ prev = $0 }'
}
for prog in "${!BIN[@]}"; do
	page=$source_root/docs/man/$prog.8
	compared=0
	run "$prog" --help
	while IFS=' ' read -r long value; do
		text=$(man_paragraph "$page" "--$long")
		[[ -n $text ]] || continue # an option documented elsewhere (vfhealthd's for the sentinel)
		grep -qE -- "default $value([^0-9]|$)" <<<"$text" ||
			fail "$prog --help gives --$long's default as $value, $prog(8) does not: $text"
		compared=$((compared + 1))
	done < <(sed -nE 's/^[[:space:]]+(-[[:alnum:]], )?--([a-z][a-z0-9-]*).*\(default ([0-9]+)[^0-9].*/\2 \3/p' <<<"$OUT")
	((compared >= 3)) || fail "$prog: only $compared numeric defaults compared with $prog(8)"
	pass "$prog: the $compared numeric defaults of --help are $prog(8)'s"
done

echo "== vfhealthd: exit statuses of vfhealthd(8)"
run vfhealthd --version
((RC == 0)) || fail "vfhealthd --version exited $RC"
expect vfhealthd 2 "bogusopt" -f --no-sentinel --db "$DB" -o bogusopt "$T/mnt-x"
expect vfhealthd 2 "one MOUNTPOINT at most" -f --no-sentinel --db "$DB" "$T/mnt-x" "$T/mnt-y"
expect vfhealthd 2 "unrecognized option '--bogus'" --bogus
expect vfhealthd 2 "--threshold" --threshold 0
expect vfhealthd 2 "unknown group" --group no-such-group-here
expect vfhealthd 2 "--poll-interval" --poll-interval 0
expect vfhealthd 2 "--log-target must be auto, journal or stderr" --log-target syslog
expect vfhealthd 2 "--sentinel-program" --sentinel-program "$T/none"
for d in "$T"/mnt-x "$T"/mnt-y; do
	[[ ! -e $d ]] || fail "a refused command line created $d"
done
: >"$T/file"
expect vfhealthd 1 "cannot create mountpoint" -f --no-sentinel --db "$DB" "$T/file/mnt"
# No privilege to mount: libfuse says what failed, vfhealthd what to do.
mkdir -p "$T/user-mnt"
chown nobody "$T/user-mnt"
RC=0
OUT=$(ASAN_OPTIONS=detect_leaks=0 timeout 20 setpriv --reuid=nobody --regid=nogroup \
	--clear-groups "$VFHEALTHD" -f --no-sentinel --db "$T/user-mnt/db" "$T/user-mnt/m" \
	2>&1 </dev/null) || RC=$?
((RC == 1)) || fail "vfhealthd as nobody exited $RC, want 1: $OUT"
grep -q "run vfhealthd as root" <<<"$OUT" || fail "vfhealthd as nobody said '$OUT'"
is_mounted "$T/user-mnt/m" && fail "nobody mounted"
# 0 after a signal (stop_daemon checks it); 1 when its sentinel dies.
start_daemon --poll-interval 0.2 --poll-timeout 0.5
stop_daemon
start_daemon --poll-interval 0.2 --poll-timeout 0.5
sentinel_pid=$(pgrep -P "$DAEMON_PID" -f vfhealth-sentinel)
[[ -n $sentinel_pid ]] || fail "no sentinel child"
kill -KILL "$sentinel_pid"
pid=$DAEMON_PID
DAEMON_PID=
wait_until 20 process_gone "$pid" || fail "vfhealthd outlived its sentinel"
rc=0
wait "$pid" || rc=$?
((rc == 1)) || fail "vfhealthd exited $rc when its sentinel died, want 1"
grep -q "the sentinel process died" "$DAEMON_LOG" || fail "no word of the sentinel's death"
unmounted() { ! is_mounted "$MNT"; }
wait_until 10 unmounted || fail "$MNT still mounted after the sentinel died"

echo "== vfhealth-sentinel: exit statuses of vfhealth-sentinel(8)"
expect vfhealth-sentinel 2 "unrecognized option '--no-sentinel'" --no-sentinel
expect vfhealth-sentinel 2 "absolute path" relative/mnt
expect vfhealth-sentinel 2 "unexpected argument" /a /b
expect vfhealth-sentinel 2 "--poll-timeout" --poll-timeout 86401
expect vfhealth-sentinel 2 "--counters-fd" --counters-fd x
# 1: it cannot start its threads (nobody, with no processes to spare).
RC=0
# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
OUT=$(ASAN_OPTIONS=detect_leaks=0 timeout 20 setpriv --reuid=nobody --regid=nogroup \
	--clear-groups bash -c 'ulimit -u 0 && exec "$0" "$1"' "$VFHEALTH_SENTINEL" "$T" \
	2>&1 </dev/null) || RC=$?
((RC == 1)) || fail "vfhealth-sentinel without threads exited $RC, want 1: $OUT"
grep -q "cannot start the sentinel" <<<"$OUT" || fail "vfhealth-sentinel said '$OUT'"
# 0 after SIGTERM, against a mount.
start_daemon --no-sentinel
"$VFHEALTH_SENTINEL" --poll-interval 0.2 --poll-timeout 0.5 \
	--metrics-file "$T/sentinel.prom" "$MNT" >"$T/sentinel.log" 2>&1 &
spid=$!
wait_for 20 "the sentinel's first poll" test -s "$T/sentinel.prom"
kill -TERM "$spid"
rc=0
wait "$spid" || rc=$?
((rc == 0)) || fail "vfhealth-sentinel exited $rc on SIGTERM: $(cat "$T/sentinel.log")"
check_sanitizers "$T/sentinel.log"
stop_daemon

echo "== vfhealth-agent: exit statuses of vfhealth-agent(8)"
expect vfhealth-agent 2 "probe-interval" --probe-interval 0
expect vfhealth-agent 2 "unrecognized option" --bogus --help
expect vfhealth-agent 2 "unexpected argument" stray
expect vfhealth-agent 2 "belongs to --query" --timeout 1
expect vfhealth-agent 3 "timeout" --query unix:/x --timeout 0
expect vfhealth-agent 3 "unrecognized option" --query unix:/x --bogus
expect vfhealth-agent 3 "No such file" --query "unix:$T/none.sock"
expect vfhealth-agent 1 "nvidia-smi" --listen "unix:$T/x.sock" --nvidia-smi "$T/none"
# An agent on a machine with an NVIDIA device whose probe succeeds (ok),
# one whose kernel log has the failure (failed), one without (unknown).
mkdir -p "$T/sys/bus/pci/devices/0000:00:03.0" "$T/nosys"
echo 0x10de >"$T/sys/bus/pci/devices/0000:00:03.0/vendor"
printf '4,1,1,-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)\n' >"$T/kmsg-failed"
agent() { # NAME ARGS...: an agent on unix:$T/NAME.sock
	local name=$1
	shift
	"$VFHEALTH_AGENT" --listen "unix:$T/$name.sock" --nvidia-smi /bin/true \
		--probe-interval 0.1 "$@" </dev/null >>"$T/agent.log" 2>&1 &
	BG_PIDS+=("$!")
	wait_for 20 "agent $name listening" test -S "$T/$name.sock"
}
query_is() { # NAME RC WORD
	run vfhealth-agent --query "unix:$T/$1.sock"
	((RC == $2)) && [[ $OUT == "$3"* ]]
}
agent ok --sysfs-root "$T/sys" --kmsg /dev/null
agent failed --sysfs-root "$T/sys" --kmsg "$T/kmsg-failed" --nvidia-smi /bin/false
agent unknown --sysfs-root "$T/nosys" --kmsg /dev/null
wait_for 20 "--query ok exits 0" query_is ok 0 ok
wait_for 20 "--query failed exits 1" query_is failed 1 failed
query_is unknown 2 unknown || fail "--query unknown exited $RC: $OUT"
for pid in "${BG_PIDS[@]}"; do
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	((rc == 0)) || fail "vfhealth-agent exited $rc on SIGTERM: $(cat "$T/agent.log")"
done
BG_PIDS=()
check_sanitizers "$T/agent.log"
echo "PASS"
