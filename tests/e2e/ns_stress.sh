#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ns_stress: namespace operations race writeback and reclaim.  zr_nsstress
# runs 4 worker processes in one shared tree (shared directories, shared
# subdirectories any of them makes and removes, private directories each
# moves around): they create files, rewrite blocks, truncate down and up,
# rename within and across directories, over another file and with
# RENAME_EXCHANGE, link, unlink one name of two or the last name of an open
# file (and go on through its fd), fsync, make files with O_TMPFILE (some
# larger than the budget, so that their blocks are written back while they
# have no name) that they close without a name or link into the tree with
# linkat(2) of /proc/self/fd/N (then write, link again, rename, unlink while
# open; with O_EXCL the link must fail), and check every read: each 4 KiB
# block carries its file id, block index and generation, and must be the
# last one the worker wrote there.  Meanwhile a loop writes `writeback all`,
# `drop_clean` and `compact` into .zramfs/control every 100 ms, over a 2 MiB
# budget with max_fds=16 (fds are closed and the backing files reopened by
# name, after the renames).  Then the backing directory after an unmount and
# the tree through a mount with default options must be what the workers'
# manifests say: every name, link count, size and block, and nothing else;
# the orphan directory (.zramfs/unlinked of the backing root) must empty
# once the workers have closed everything, and the backing root must hold
# only the tree after each unmount.
# (Link counts are read with statx(AT_STATX_FORCE_SYNC), and refreshed so
# before each link(2): the kernel's cached count can lag when a listing of
# the directory races link and unlink, with libfuse's passthrough_ll -o
# writeback too; `zr_nsstress run -K` trusts the cache, to see it.)
#
# ZR_NSSTRESS_SECS (default 25) and ZR_NSSTRESS_OPS (operations per worker,
# default 0: no limit) make longer or shorter runs; ZR_NSSTRESS_SEED picks
# the seed (default: a new one each run, printed).  A failure prints the
# seed and the command that repeats each worker's operations (not their
# interleaving with the others and with the daemon).
SECS=${ZR_NSSTRESS_SECS:-25}
OPS=${ZR_NSSTRESS_OPS:-0}
SEED=${ZR_NSSTRESS_SEED:-$(( ($(date +%s) * 1000 + RANDOM) % 1000000000 ))}
# (before lib.sh, which sets its default)
ZR_TIMEOUT=${ZR_TIMEOUT:-$((SECS + 120))}
. "$(dirname "$0")/lib.sh"
zr_init
NS=$(zr_helper zr_nsstress)

B=$ZR_TMP/backing M=$ZR_TMP/mnt MAN=$ZR_TMP/manifests
mkdir -p "$B" "$M" "$MAN"
OPTS="size=2M,block_size=16k,dirty_expire=200ms,max_fds=16"
ARGS=(-P 4 -S "$SEED" -T "$SECS" -N "$OPS")

# repro: how to run this again, and what the daemon said besides the
# control commands
repro() {
	if zr_real && [ -s "$ZR_LOG" ]; then
		echo "--- the daemon's log $ZR_LOG, without the control commands:" >&2
		{ grep -v "control: '" "$ZR_LOG" || true; } | tail -n 20 >&2
	fi
	echo "seed $SEED; to repeat: ZR_NSSTRESS_SEED=$SEED ZR_NSSTRESS_SECS=$SECS ZR_NSSTRESS_OPS=$OPS make check TESTS=tests/e2e/ns_stress.sh" >&2
	echo "  or by hand: zramfs -f -o $OPTS BACKING MNT & $NS run ${ARGS[*]} -M MANIFESTS MNT/t" >&2
}

zr_mount "$OPTS" "$B" "$M"
M=$ZR_MNT

say "zr_nsstress run ${ARGS[*]} (seed $SEED), control commands every 100 ms"
"$NS" run "${ARGS[@]}" -M "$MAN" "$M/t" >"$ZR_TMP/ns.out" 2>"$ZR_TMP/ns.err" &
NS_PID=$!

ZR_CHURN_N=0
zr_stats_on && zr_churn "$NS_PID" zr_nsstress "writeback all" drop_clean compact
rc=0
wait "$NS_PID" || rc=$?
cat "$ZR_TMP/ns.out"
if [ "$rc" != 0 ]; then
	head -n 120 "$ZR_TMP/ns.err" >&2
	repro
	fail "zr_nsstress failed (exit $rc) on -o $OPTS"
fi
[ -s "$ZR_TMP/ns.err" ] && cat "$ZR_TMP/ns.err"
say "ok: 4 workers matched their models; $ZR_CHURN_N control commands"
if zr_stats_on && grep -q "O_TMPFILE is refused" "$ZR_TMP/ns.err"; then
	# (the daemon refuses it only where the backing filesystem has none)
	if command -v python3 >/dev/null &&
	   python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR))' "$B" 2>/dev/null; then
		repro
		fail "zramfs refused O_TMPFILE on a backing filesystem that has it"
	fi
	say "note: O_TMPFILE was not tried: the backing filesystem has none"
fi
# every file the workers unlinked while open, or made with O_TMPFILE and
# left without a name, is closed: its orphan (its only link) goes once the
# kernel has forgotten it too.  (An O_TMPFILE file given a name loses its
# orphan's name at the link, 7691879; a file whose last name zramfs knew
# went while it had another, never looked up, keeps its orphan's name as a
# second link until the kernel forgets it, which it need not do while the
# name is in its cache.)
if zr_real; then
	for n in $(seq 50); do
		left=$({ find "$B/.zramfs/unlinked" -maxdepth 1 -type f -links 1 2>/dev/null || true; } | wc -l)
		[ "$left" = 0 ] && break
		sleep 0.2
	done
	if [ "$left" != 0 ]; then
		{ ls -lA "$B/.zramfs/unlinked" || true; } | head -n 20 >&2
		repro
		fail "$left orphans without another link left in $B/.zramfs/unlinked 10 s after every file was closed"
	fi
	# (and those are files of the tree)
	find "$B/t" -type f -printf '%i\n' | sort -u >"$ZR_TMP/tree.inos"
	n=0
	for ino in $(find "$B/.zramfs/unlinked" -maxdepth 1 -type f -printf '%i\n' 2>/dev/null); do
		n=$((n + 1))
		grep -qx "$ino" "$ZR_TMP/tree.inos" ||
			fail "orphan inode $ino has $(stat -c %h "$B/.zramfs/unlinked/zr-$ino-"* 2>/dev/null) links, none of them in the tree"
	done
	say "orphans left with a name in the tree (which the kernel still holds): $n"
fi
if zr_stats_on; then
	say "stats: writebacks $(zr_stat writebacks) demotions $(zr_stat demotions) misses $(zr_stat misses) bytes_read_backing $(zr_stat bytes_read_backing) fd_opens $(zr_stat fd_opens) orphans $(zr_stat orphans) removed_dropped $(zr_stat removed_dropped) writeback_errors $(zr_stat writeback_errors)"
	[ "$(zr_stat writeback_errors)" = 0 ] || fail "writeback errors counted"
fi
zr_umount

# check_root WHEN: the backing root holds the tree and nothing else (no
# .zramfs: no orphan directory, no orphan left behind)
check_root() {
	local left
	left=$(ls -A "$B" | tr '\n' ' ')
	if [ "$left" != "t " ]; then
		ls -lAR "$B/.zramfs" >&2 2>/dev/null || true
		repro
		fail "the backing root holds '$left' $1, expected only t"
	fi
}

say "the backing directory after the unmount"
check_root "after the unmount"
if ! "$NS" verify -M "$MAN" "$B/t"; then
	repro
	fail "the backing directory differs from the manifests after the unmount"
fi
zr_mount "" "$B" "$M"
say "the tree through a new mount with default options"
if ! "$NS" verify -M "$MAN" "$ZR_MNT/t"; then
	repro
	fail "the tree differs from the manifests after a remount"
fi
zr_umount
check_root "after the second unmount"
say "ok: the backing directory and a new mount hold what the manifests say"
