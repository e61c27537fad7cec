#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fsx_stress: four zr_fsx processes on four files (up to 4 MiB each, 16 MiB
# in all) over a 2 MiB budget, while a loop writes `drop_clean`, `compact`
# and `writeback all` into .zramfs/control every 100 ms: reclaim,
# compaction and writeback race with reads, read-modify-writes, truncates,
# punches, mmap, O_DIRECT writes and copy_file_range.  Every read is
# checked against the models; after an unmount the backing files and after
# a remount the files must equal the models' final content.
# Environment: ZR_FSX_OPS (operations per process, default 30000),
# ZR_FSX_SEED (added to the seed 11, default 0).
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=${ZR_TIMEOUT:-120}
zr_init
FSX=$(zr_helper zr_fsx)

B=$ZR_TMP/backing M=$ZR_TMP/mnt D=$ZR_TMP/model
mkdir -p "$B" "$M" "$D"
NOPS=${ZR_FSX_OPS:-30000}
SEED=${ZR_FSX_SEED:-0}
case $SEED in ''|*[!0-9]*) fail "ZR_FSX_SEED must be a number: '$SEED'" ;; esac
OPTS="size=2M,block_size=16k,dirty_expire=200ms"

zr_mount "$OPTS" "$B" "$M"
M=$ZR_MNT

say "4 x zr_fsx -N $NOPS -S $((SEED + 11)), control commands every 100 ms"
FSX_ARGS=(-P 4 -N "$NOPS" -l 4m -o 64k -m -c -d -b 16k -S $((SEED + 11)) -X seek,dread)
"$FSX" "${FSX_ARGS[@]}" -D "$D/f" "$M/f" >"$ZR_TMP/fsx.out" 2>"$ZR_TMP/fsx.err" &
FSX_PID=$!

ZR_CHURN_N=0
zr_stats_on && zr_churn "$FSX_PID" zr_fsx drop_clean compact "writeback all"
rc=0
wait "$FSX_PID" || rc=$?
cat "$ZR_TMP/fsx.out"
if [ "$rc" != 0 ]; then
	head -n 80 "$ZR_TMP/fsx.err" >&2
	fail "zr_fsx ${FSX_ARGS[*]} -D DUMP $M/f failed (exit $rc) on -o $OPTS"
fi
say "ok: 4 processes matched their models; $ZR_CHURN_N control commands"
if zr_stats_on; then
	say "stats: writebacks $(zr_stat writebacks) writeback_errors $(zr_stat writeback_errors)"
	[ "$(zr_stat writeback_errors)" = 0 ] || fail "writeback errors counted"
fi
zr_umount

for i in 0 1 2 3; do
	cmp "$D/f.$i" "$B/f.$i" || fail "backing f.$i differs from the model after unmount"
done
zr_mount "" "$B" "$M"
for i in 0 1 2 3; do
	cmp "$D/f.$i" "$ZR_MNT/f.$i" || fail "f.$i differs from the model after remount"
done
zr_umount
say "ok: files equal the models after unmount and remount"
