#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ns_stress: namespace operations race writeback and reclaim.  zr_nsstress
# runs 4 worker processes in one shared tree (shared directories, shared
# subdirectories any of them makes and removes, private directories each
# moves around): they create files, rewrite blocks, truncate down and up,
# rename within and across directories, over another file and with
# RENAME_EXCHANGE, link, unlink one name of two or the last name of an open
# file (and go on through its fd), fsync, and check every read: each 4 KiB
# block carries its file id, block index and generation, and must be the
# last one the worker wrote there.  Meanwhile a loop writes `writeback all`,
# `drop_clean` and `compact` into .zramfs/control every 100 ms, over a 2 MiB
# budget with max_fds=16 (fds are closed and the backing files reopened by
# name, after the renames).  Then the backing directory after an unmount and
# the tree through a mount with default options must be what the workers'
# manifests say: every name, link count, size and block, and nothing else.
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
		grep -v "control: '" "$ZR_LOG" | tail -n 20 >&2
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
if zr_stats_on; then
	say "stats: writebacks $(zr_stat writebacks) demotions $(zr_stat demotions) misses $(zr_stat misses) bytes_read_backing $(zr_stat bytes_read_backing) fd_opens $(zr_stat fd_opens) removed_dropped $(zr_stat removed_dropped) writeback_errors $(zr_stat writeback_errors)"
	[ "$(zr_stat writeback_errors)" = 0 ] || fail "writeback errors counted"
fi
zr_umount

say "the backing directory after the unmount"
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
say "ok: the backing directory and a new mount hold what the manifests say"
