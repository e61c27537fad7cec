# SPDX-License-Identifier: GPL-2.0-or-later
# lib.sh: shared helpers of the zramfs end-to-end tests (sourced by bash).
#
# A test script sources this file, calls zr_init, mounts with zr_mount,
# works through $ZR_MNT and unmounts with zr_umount.  Every exit path runs
# zr_cleanup (an EXIT trap): it unmounts what the test mounted, kills the
# daemon the test started (by its PID), removes the temporary directory and
# prints one summary line.  A watchdog kills the daemon and the test after
# $ZR_TIMEOUT seconds so that a hung FUSE request cannot hang `make check`.
#
# Environment (set by `make check`, see e2e.am):
#   ZRAMFS, ZRAMFSCTL     the daemon and the control tool under test
#   TOP_SRCDIR, TOP_BUILDDIR
#   ZR_E2E_NOMOUNT=1      do not mount: "mounting" uses the backing directory
#                         itself, to debug the scripts' own logic without
#                         the daemon; daemon-only checks are skipped.
#                         Tests therefore reach the files through $ZR_MNT.
#   ZR_E2E_NOSTATS=1      the daemon has no .zramfs control directory (to
#                         debug the scripts against another FUSE filesystem,
#                         e.g. libfuse's passthrough_ll); stats checks skipped
#   ZR_E2E_OPTS           -o options added to every mount (uring.sh runs
#                         other tests with uring=on this way)
#   ZR_E2E_URING=1        every unmount first checks that requests came
#                         through io_uring (uring_active, uring_requests)
#   ZR_E2E_KEEP=1         keep the temporary directory (for debugging)
#   TMPDIR                where temporary directories go (default /tmp)
#
# Exit codes follow automake: 0 pass, 1 fail, 77 skip (only when /dev/fuse
# or a required tool is absent), 99 hard error.

set -eu
set -o pipefail

ZR_TEST=$(basename "$0" .sh)
ZR_TIMEOUT=${ZR_TIMEOUT:-120}
ZR_TMP=
ZR_PID=
ZR_MNT=
ZR_ATEXIT=()
ZR_BACKING=
ZR_LOG=
ZR_NMOUNT=0
ZR_WATCHDOG=
ZR_START=$(date +%s)

if [ -z "${TOP_BUILDDIR:-}" ]; then
	# Run by hand from an in-tree build: guess the build directory.
	TOP_BUILDDIR=$(cd "$(dirname "$0")/../.." && pwd)
fi
: "${ZRAMFS:=$TOP_BUILDDIR/src/zramfs}"
: "${ZRAMFSCTL:=$TOP_BUILDDIR/src/zramfsctl}"
ZR_HELPERS=$TOP_BUILDDIR/tests/e2e

# --- messages ------------------------------------------------------------

# say MSG...: progress line (what the test does or checks now).
say() { echo "  -- $*"; }

# fail MSG...: the test failed; the EXIT trap cleans up.
fail() {
	echo "FAIL: $ZR_TEST: $*" >&2
	exit 1
}

# zr_skip MSG...: the test cannot run here (exit 77), says why.
zr_skip() {
	echo "SKIP: $ZR_TEST: $*" >&2
	exit 77
}

# zr_real: true when a real zramfs mount is used (not ZR_E2E_NOMOUNT=1).
zr_real() { [ "${ZR_E2E_NOMOUNT:-0}" != 1 ]; }

# zr_stats_on: true when .zramfs/stats and control can be used.
zr_stats_on() { zr_real && [ "${ZR_E2E_NOSTATS:-0}" != 1 ]; }

# zr_need_daemon WHY: skip in NOMOUNT mode (the test only makes sense
# against the daemon).
zr_need_daemon() {
	zr_real || zr_skip "needs the daemon ($*); ZR_E2E_NOMOUNT=1"
}

# zr_need_tool TOOL...: skip when a tool is absent.
zr_need_tool() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || zr_skip "required tool '$t' is absent"
	done
}

# zr_need_root WHY: skip unless root (tmpfs and bind mounts, other users).
zr_need_root() {
	[ "$(id -u)" = 0 ] || zr_skip "needs root ($*)"
}

# zr_mount_fault OPTS BACKING [MNT]: zr_mount with the fault shim $FAULT
# (zr_helper zr_fault.so) preloaded into the daemon; the ZR_FAULT_*
# variables set before the call arm it. ASan wants to be the first library
# loaded: it is told not to mind, keeping the options it was given.
zr_mount_fault() {
	LD_PRELOAD=${FAULT:?zr_mount_fault: FAULT is not set} \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		zr_mount "$@"
}

# zr_helper NAME: path of a helper program built by `make check`.
zr_helper() {
	local p="$ZR_HELPERS/$1"
	[ -x "$p" ] || fail "helper $p not built (run 'make check' or 'make tests/e2e/$1')"
	echo "$p"
}

# --- setup and cleanup ---------------------------------------------------

# zr_init: checks the environment, makes $ZR_TMP, installs the traps and the
# watchdog.  Call once at the top of each test, after setting ZR_TIMEOUT.
zr_init() {
	if zr_real; then
		[ -c /dev/fuse ] || zr_skip "/dev/fuse is absent"
		{ [ -r /dev/fuse ] && [ -w /dev/fuse ]; } ||
			zr_skip "/dev/fuse is not open to $(id -un)"
		zr_need_tool mountpoint umount fusermount3
		[ -x "$ZRAMFS" ] || fail "daemon '$ZRAMFS' is not built"
	fi
	# tests open thousands of files in one process: a login shell's
	# soft limit (1024 on Debian) is raised to the hard one
	ulimit -S -n "$(ulimit -H -n)" 2>/dev/null || true
	ZR_TMP=$(mktemp -d "${TMPDIR:-/tmp}/zr-e2e-$ZR_TEST.XXXXXX") ||
		fail "mktemp failed"
	ZR_TMP=$(realpath "$ZR_TMP")
	trap zr_cleanup EXIT
	trap 'echo "$ZR_TEST: interrupted" >&2; exit 130' INT HUP
	trap 'echo "$ZR_TEST: terminated" >&2; exit 124' TERM
	zr_start_watchdog
	if zr_real; then
		echo "== $ZR_TEST: start (daemon $ZRAMFS, tmp $ZR_TMP)"
	else
		echo "== $ZR_TEST: start (ZR_E2E_NOMOUNT=1: no mount, tmp $ZR_TMP)"
	fi
}

# The watchdog: after $ZR_TIMEOUT s, kill -9 the current daemon (that aborts
# any request a test command is blocked in) and terminate the test.
zr_start_watchdog() {
	local main=$$ pidfile="$ZR_TMP/.daemon_pid" secs=$ZR_TIMEOUT
	(
		set +e
		trap 'kill "$s" 2>/dev/null; exit 0' TERM
		sleep "$secs" &
		s=$!
		wait "$s"
		echo "$ZR_TEST: TIMEOUT after ${secs}s" >&2
		p=$(cat "$pidfile" 2>/dev/null)
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null
		kill -TERM "$main" 2>/dev/null
		# The test's shell runs its trap only once its foreground
		# command ends: end that command too (children of the test).
		pkill -TERM -P "$main" 2>/dev/null
	) </dev/null &
	ZR_WATCHDOG=$!
}

# zr_is_mounted PATH: true if PATH is a mount point (from mountinfo, which
# also sees dead FUSE mounts that `mountpoint` cannot stat).
zr_is_mounted() {
	awk -v p="$1" '$5 == p { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# zr_cleanup: the EXIT trap.  Unmounts everything under $ZR_TMP, kills the
# daemon this test started if it is still alive, runs the commands the test
# added to ZR_ATEXIT (e.g. removing a cgroup), removes $ZR_TMP and prints
# the summary line.  Keeps the exit status of the test.
zr_cleanup() {
	local rc=$? m
	trap - EXIT INT HUP TERM
	# Finish cleaning up even if whoever reads our output has gone.
	trap '' PIPE
	set +e
	if [ -n "$ZR_WATCHDOG" ]; then
		kill "$ZR_WATCHDOG" 2>/dev/null
		wait "$ZR_WATCHDOG" 2>/dev/null
	fi
	if [ -n "$ZR_PID" ] && kill -0 "$ZR_PID" 2>/dev/null; then
		if [ -n "$ZR_MNT" ] && zr_is_mounted "$ZR_MNT"; then
			fusermount3 -u "$ZR_MNT" 2>/dev/null || umount "$ZR_MNT" 2>/dev/null
		fi
		zr_wait_pid "$ZR_PID" 10 ||
			echo "$ZR_TEST: cleanup: daemon $ZR_PID did not exit, killed" >&2
	fi
	if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "$ZR_LOG" ] && [ -s "$ZR_LOG" ]; then
		echo "--- last lines of the daemon log $ZR_LOG:" >&2
		tail -n 40 "$ZR_LOG" >&2
		echo "---" >&2
	fi
	if [ -n "$ZR_TMP" ]; then
		# Everything mounted under our directory, most recent first.
		for m in $(awk -v t="$ZR_TMP/" 'index($5, t) == 1 { print $5 }' \
				/proc/self/mountinfo | tac); do
			fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
				echo "$ZR_TEST: cleanup: cannot unmount $m" >&2
		done
		# what the test asked to undo once its daemon is gone
		for m in "${ZR_ATEXIT[@]}"; do
			eval "$m"
		done
		if [ "${ZR_E2E_KEEP:-0}" = 1 ]; then
			echo "$ZR_TEST: keeping $ZR_TMP" >&2
		else
			chmod -R u+rwx "$ZR_TMP" 2>/dev/null
			rm -rf --one-file-system "$ZR_TMP"
		fi
	fi
	local secs=$(($(date +%s) - ZR_START)) word
	case $rc in
	0) word=PASS ;;
	77) word=SKIP ;;
	*) word="FAIL (exit $rc)" ;;
	esac
	echo "== $ZR_TEST: $word in ${secs}s"
	exit "$rc"
}

# --- mounting ------------------------------------------------------------

# zr_running PID: the process runs (exists and is not a zombie: a daemon
# that is our child may have exited without bash having reaped it yet)
zr_running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# zr_wait_pid PID SECS: waits for a child of this shell to exit, kill -9 on
# timeout.  Sets ZR_WAIT_RC to its exit status; returns 1 on timeout.
zr_wait_pid() {
	local pid=$1 n=$(($2 * 10))
	while zr_running "$pid"; do
		n=$((n - 1))
		if [ "$n" -le 0 ]; then
			kill -9 "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			ZR_WAIT_RC=timeout
			return 1
		fi
		sleep 0.1
	done
	ZR_WAIT_RC=0
	wait "$pid" 2>/dev/null || ZR_WAIT_RC=$?
	return 0
}

# zr_mount OPTS BACKING [MNT]: starts `zramfs -f [-o OPTS] BACKING [MNT]` in
# the background, records its PID in ZR_PID and waits (10 s at most) until
# MNT (BACKING when MNT is absent: a mount over itself) is mounted.  Sets
# ZR_MNT to the path the test must use and ZR_BACKING.  Fails, showing the
# daemon's output, if the daemon exits or does not mount.  ZR_DAEMON_ARGS
# adds words to the command line (-s).
zr_mount() {
	local opts=$1 backing=$2 mnt=${3:-$2} n
	ZR_BACKING=$backing
	if ! zr_real; then
		ZR_MNT=$backing
		return 0
	fi
	[ -z "$ZR_PID" ] || fail "zr_mount: daemon $ZR_PID still running"
	ZR_MNT=$mnt
	ZR_NMOUNT=$((ZR_NMOUNT + 1))
	ZR_LOG="$ZR_TMP/daemon.$ZR_NMOUNT.log"
	local args=(-f)
	[ -n "${ZR_DAEMON_ARGS:-}" ] && read -r -a args <<<"-f $ZR_DAEMON_ARGS"
	[ -n "${ZR_E2E_OPTS:-}" ] && opts=${opts:+$opts,}$ZR_E2E_OPTS
	[ -n "$opts" ] && args+=(-o "$opts")
	args+=("$backing")
	[ $# -ge 3 ] && args+=("$mnt")
	say "mount: zramfs ${args[*]}"
	# A background job of a non-interactive shell starts with SIGINT
	# ignored, and libfuse keeps an ignored signal ignored: restore it.
	env --default-signal=INT,QUIT "$ZRAMFS" "${args[@]}" </dev/null >"$ZR_LOG" 2>&1 &
	ZR_PID=$!
	echo "$ZR_PID" >"$ZR_TMP/.daemon_pid"
	for n in $(seq 100); do
		zr_is_mounted "$mnt" && return 0
		if ! zr_running "$ZR_PID"; then
			local rc=0
			wait "$ZR_PID" || rc=$?
			ZR_PID=
			echo "--- daemon output:" >&2
			cat "$ZR_LOG" >&2
			fail "zramfs exited with status $rc before mounting $mnt"
		fi
		sleep 0.1
	done
	fail "zramfs did not mount $mnt within 10 s"
}

# zr_umount: unmounts ZR_MNT, waits (60 s at most) for the daemon to write
# everything back and exit, and fails unless it exited with status 0.
zr_umount() {
	if ! zr_real; then
		sync
		return 0
	fi
	[ -n "$ZR_PID" ] || fail "zr_umount: no daemon running"
	local err err2
	if [ "${ZR_E2E_URING:-0}" = 1 ] && zr_stats_on; then
		[ "$(zr_stat uring_active)" = 1 ] && [ "$(zr_stat uring_requests)" -gt 0 ] ||
			fail "ZR_E2E_URING=1, but requests did not come through io_uring (uring_active $(zr_stat uring_active), uring_requests $(zr_stat uring_requests))"
	fi
	if ! err=$(umount "$ZR_MNT" 2>&1); then
		err2=$(fusermount3 -u "$ZR_MNT" 2>&1) ||
			fail "cannot unmount $ZR_MNT: $err / $err2"
	fi
	zr_wait_pid "$ZR_PID" 60 ||
		fail "daemon $ZR_PID did not exit within 60 s of the unmount"
	local rc=$ZR_WAIT_RC
	ZR_PID=
	rm -f "$ZR_TMP/.daemon_pid"
	[ "$rc" = 0 ] || fail "daemon exited with status $rc after unmount (expected 0)"
	! zr_is_mounted "$ZR_MNT" || fail "$ZR_MNT still mounted after unmount"
}

# zr_kill9: kill -9 the daemon and remove the dead mount (lazy unmount).
zr_kill9() {
	zr_real || return 0
	kill -9 "$ZR_PID" 2>/dev/null || true
	wait "$ZR_PID" 2>/dev/null || true
	ZR_PID=
	rm -f "$ZR_TMP/.daemon_pid"
	fusermount3 -uz "$ZR_MNT" 2>/dev/null || umount -l "$ZR_MNT" 2>/dev/null || true
	! zr_is_mounted "$ZR_MNT" || fail "cannot remove the dead mount $ZR_MNT"
}

# zr_memcg NAME BYTES: makes the cgroup v1 memory cgroup NAME limited to
# BYTES (skips the test without a writable controller), sets CG to its
# directory and ZR_IN_CG to a wrapper that starts the daemon in it (use as
# ZRAMFS). At exit, whatever still runs in it is killed and it is removed.
zr_memcg() {
	local root=/sys/fs/cgroup/memory
	zr_need_root "creates a memory cgroup"
	[ -w "$root/cgroup.procs" ] ||
		zr_skip "no writable cgroup v1 memory controller at $root"
	CG=$root/$1.$$
	mkdir "$CG" || fail "cannot create $CG"
	ZR_ATEXIT+=("for p in \$(cat '$CG/cgroup.procs' 2>/dev/null); do kill -9 \$p; done 2>/dev/null; sleep 0.2; rmdir '$CG' 2>/dev/null || echo \"cleanup: cannot remove $CG\" >&2")
	echo "$2" >"$CG/memory.limit_in_bytes" || fail "cannot set the limit of $CG"
	ZR_IN_CG=$ZR_TMP/in_cgroup
	cat >"$ZR_IN_CG" <<SH
#!/bin/sh
echo \$\$ >"$CG/cgroup.procs" && exec "$ZRAMFS" "\$@"
SH
	chmod +x "$ZR_IN_CG"
}

# zr_hogs_start [N]: starts N CPU hogs (busy shell loops; default one per
# CPU), their pids in ZR_HOGS; they end with the test whatever happens.
ZR_HOGS=() ZR_HOGS_ATEXIT=0
zr_hogs_start() {
	local i
	# (registered once; ZR_HOGS is empty once zr_hogs_stop reaped them)
	[ "$ZR_HOGS_ATEXIT" = 1 ] ||
		ZR_ATEXIT+=('[ ${#ZR_HOGS[@]} = 0 ] || kill "${ZR_HOGS[@]}" 2>/dev/null')
	ZR_HOGS_ATEXIT=1
	for i in $(seq "${1:-$(nproc)}"); do
		sh -c 'while :; do :; done' &
		ZR_HOGS+=($!)
	done
}

# zr_hogs_stop: ends the hogs zr_hogs_start started, and reaps them.
zr_hogs_stop() {
	local h
	[ "${#ZR_HOGS[@]}" = 0 ] && return 0
	kill "${ZR_HOGS[@]}" 2>/dev/null || true
	for h in "${ZR_HOGS[@]}"; do
		wait "$h" 2>/dev/null || true
	done
	ZR_HOGS=()
}

# zr_churn PID WHO CMD...: while PID runs, write the CMDs into the control
# file of $ZR_MNT in turn, one every 100 ms, so that reclaim, compaction and
# writeback race the workload of WHO (a name for the message); fails when
# one is refused.  Sets ZR_CHURN_N to the number written.
zr_churn() {
	local pid=$1 who=$2 c
	shift 2
	ZR_CHURN_N=0
	while kill -0 "$pid" 2>/dev/null; do
		for c in "$@"; do
			echo "$c" >"$ZR_MNT/.zramfs/control" ||
				fail "control command '$c' failed while $who runs"
			ZR_CHURN_N=$((ZR_CHURN_N + 1))
			sleep 0.1
		done
	done
}

# zr_mount_tmpfs DIR SIZE: mounts a tmpfs of SIZE on DIR (needs root).
zr_mount_tmpfs() {
	zr_need_root "mounts a tmpfs"
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1" ||
		zr_skip "cannot mount a tmpfs on $1"
}

# zr_mount_cramped BACKING MNT: zramfs with a 4 MiB budget (dirty data
# written back after 200 ms) over an 8 MiB tmpfs at BACKING, mounted on
# MNT (ZR_MNT): a budget and a disk that 12 MiB of random data, written by
# zr_write_refused, cannot fit in together.
zr_mount_cramped() {
	mkdir -p "$2"
	zr_mount_tmpfs "$1" 8m
	zr_mount "size=4M,dirty_expire=200ms" "$1" "$2"
}

# zr_write_refused FILE SRC [SIZE]: writes MiB k of SRC into MiB 2k of FILE
# (every other MiB), FILE first made SIZE bytes long when given, and
# closes it; over a budget and a disk that cannot take it (as
# zr_mount_cramped's, for 12 MiB of SRC), the writeback WRITEs are refused. Prints the error the writer got; fails the test
# when it got none (then nothing was refused).
zr_write_refused() {
	python3 - "$@" <<'PY' || fail "the writer: $?"
import os, sys
MiB = 1 << 20
with open(sys.argv[2], "rb") as f:
    src = f.read()
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
if len(sys.argv) > 3:
    os.ftruncate(fd, int(sys.argv[3]))
err = None
try:
    for k in range(len(src) // MiB):
        os.pwrite(fd, src[k * MiB:(k + 1) * MiB], 2 * k * MiB)
except OSError as e:
    err = e
try:
    os.close(fd)
except OSError as e:
    err = err or e
print("     the writer got: %s" % (err,))
if err is None:
    sys.exit("no error: it all fitted, nothing was refused")
PY
}

# --- statistics and control ----------------------------------------------

# zr_stat NAME: prints one value of .zramfs/stats (fails if missing).
# Prints nothing in NOMOUNT mode.
zr_stat() {
	zr_stats_on || return 0
	local v
	v=$(awk -v n="$1" '$1 == n { print $2; exit }' "$ZR_MNT/.zramfs/stats") ||
		fail "cannot read $ZR_MNT/.zramfs/stats"
	[ -n "$v" ] || fail "stats has no line '$1'"
	echo "$v"
}

# zr_wait_settled SECS: waits until no block is pending compression
# (blocks_pending is 0), for at most SECS seconds; fails (status 1) if
# some still are.
zr_wait_settled() {
	local i
	for i in $(seq $(($1 * 10))); do
		[ "$(zr_stat blocks_pending)" = 0 ] && return 0
		sleep 0.1
	done
	[ "$(zr_stat blocks_pending)" = 0 ]
}

# zr_config NAME: prints one value of .zramfs/config.
zr_config() {
	zr_stats_on || return 0
	local v
	v=$(awk -v n="$1" '$1 == n { print $2; exit }' "$ZR_MNT/.zramfs/config") ||
		fail "cannot read $ZR_MNT/.zramfs/config"
	[ -n "$v" ] || fail "config has no line '$1'"
	echo "$v"
}

# zr_ctl CMD: writes one command to .zramfs/control, fails if refused.
zr_ctl() {
	zr_stats_on || return 0
	say "control: $*"
	echo "$*" >"$ZR_MNT/.zramfs/control" || fail "control command '$*' failed"
}

# zr_drop_kcache: drops the kernel's clean page cache so that the next read
# goes to the daemon (best effort: needs root; see zr_can_drop_kcache).
zr_drop_kcache() {
	{ echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null || true
}
zr_can_drop_kcache() { [ -w /proc/sys/vm/drop_caches ]; }

# zr_sums DIR: sha256 of every regular file under DIR, sorted by name,
# without the control directory.
zr_sums() {
	(cd "$1" && find . -path ./.zramfs -prune -o -type f -print0 |
		LC_ALL=C sort -z | xargs -0r sha256sum)
}

# zr_same_sums EXPECTED DIR WHAT: compares zr_sums DIR with file EXPECTED.
zr_same_sums() {
	local got="$ZR_TMP/sums.got"
	zr_sums "$2" >"$got" || fail "cannot checksum $2 ($3)"
	if ! cmp -s "$1" "$got"; then
		diff "$1" "$got" | head -n 20 >&2 || true
		fail "checksums differ: $3"
	fi
	say "ok: $(wc -l <"$got") files identical: $3"
}

# zr_expect_err MSG CMD...: CMD must fail and its stderr contain MSG (e.g.
# "Read-only file system"); shows both when not.
zr_expect_err() {
	local msg=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded, expected failure with '$msg'"
	fi
	case $out in
	*"$msg"*) say "ok: '$*' failed: $out" ;;
	*) fail "'$*' failed with '$out', expected '$msg'" ;;
	esac
}

# zr_fd_count PID: number of open file descriptors of a process.
zr_fd_count() {
	ls "/proc/$1/fd" | wc -l
}
