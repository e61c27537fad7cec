#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# codec_fail: a codec that fails (zstd out of memory for its working
# memory, made so by zr_fault.so's ZR_FAULT_ZSTD) does not fail the write.
# With the writeback cache a failed WRITE is lost data: the kernel has
# already told the writer yes, and drops the pages it could not write.
# The block is stored uncompressed instead, to be compressed later
# (helper-56); codec_errors counts it.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the codec is the daemon's"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# (base64 text: it compresses, so every block goes to the codec; 12 MiB
# in a 64 MiB budget stays in RAM, dirty)
head -c $((9 << 20)) /dev/urandom | base64 >"$ZR_TMP/a"
touch "$ZR_TMP/armed"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_ZSTD=1 \
	zr_mount_fault "size=64M,comp=zstd,dirty_expire=1h,seq_cutoff=0" "$B" "$M"

say "write while zstd fails"
# (the close sends the kernel's cached pages as WRITEs; no fsync, which
# would write the blocks back, so that they stay dirty in RAM)
dd if="$ZR_TMP/a" of="$ZR_MNT/a" bs=1M status=none ||
	fail "the write failed while zstd could not allocate"
zr_drop_kcache
cmp "$ZR_TMP/a" "$ZR_MNT/a" || fail "a reads back wrong after zstd failed"
errs=$(zr_stat codec_errors) dirty=$(zr_stat blocks_dirty) pend=$(zr_stat blocks_pending)
say "codec_errors $errs, blocks_dirty $dirty, blocks_pending $pend"
[ "$errs" -gt 0 ] || fail "no codec error counted: did the fault reach the daemon?"
[ "$dirty" -gt 0 ] || fail "the file is not dirty in RAM (written through?)"
[ "$pend" -gt 0 ] || fail "the blocks the codec failed on are not pending"
sync "$ZR_MNT/a" || fail "fsync failed while zstd could not allocate"
cmp "$ZR_TMP/a" "$B/a" || fail "the backing file of a is not whole after fsync"

grep -q "zstd failed (Cannot allocate memory)" "$ZR_LOG" ||
	fail "the daemon did not log the failure"

# (after a failure the codec is tried again after 1 s, then 2, 4...: the
# blocks are compressed within a few seconds of zstd's return)
say "zstd works again: the pending blocks are compressed"
rm "$ZR_TMP/armed"
for i in $(seq 300); do
	[ "$(zr_stat blocks_pending)" = 0 ] && break
	sleep 0.1
done
[ "$(zr_stat blocks_pending)" = 0 ] || fail "blocks still pending 30 s after zstd came back"
zr_drop_kcache
cmp "$ZR_TMP/a" "$ZR_MNT/a" || fail "a reads back wrong once compressed"
zr_umount
cmp "$ZR_TMP/a" "$B/a" || fail "the backing file of a is not whole after unmount"
say "ok"
