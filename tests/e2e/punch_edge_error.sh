#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# punch_edge_error: a hole punched inside a block the tier holds zeroes
# that block's part in RAM. When the block cannot be read (corrupt, or no
# memory to decompress it: made so by zr_fault.so's ZR_FAULT_ZSTD_READ),
# the punch fails and changes nothing. It used to pass over the block as
# if the tier did not hold it and say yes: the range then read its old
# bytes, which the next writeback put back over the hole (helper-58).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the tier is the daemon's"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_ZSTD_READ=1 \
	zr_mount_fault "size=64M,comp=zstd,dirty_expire=1h,seq_cutoff=0" "$B" "$M"

# (base64 text: it compresses; one 64 KiB block and a bit)
head -c 52500 /dev/urandom | base64 -w 0 >"$ZR_TMP/a"
cp "$ZR_TMP/a" "$M/a"
# until the blocks are compressed (stored as they are at first)
for i in $(seq 100); do
	[ "$(zr_stat blocks_pending)" = 0 ] && break
	sleep 0.1
done
[ "$(zr_stat blocks_pending)" = 0 ] || fail "blocks still pending after 10 s"
[ "$(zr_stat blocks_hot)" -gt 0 ] || fail "no block compressed"

say "punch 1000 bytes at 100, in a block zstd cannot decompress"
touch "$ZR_TMP/armed"
# (the call's own answer: fallocate(1) would also report the close's)
punched=$(python3 - "$M/a" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_WRONLY)
rc = libc.fallocate(fd, 3, 100, 1000)	# PUNCH_HOLE | KEEP_SIZE
print(1 if rc == 0 else "0 (%s)" % os.strerror(ctypes.get_errno()))
try:
    os.close(fd)
except OSError:
    pass
PY
)
say "the punch said: $punched"
[ "${punched%% *}" = 0 ] ||
	fail "the punch said yes over a block the tier could not read"
rm "$ZR_TMP/armed"
zr_drop_kcache
cmp "$ZR_TMP/a" "$M/a" || fail "the failed punch changed a"
zr_umount
cmp "$ZR_TMP/a" "$B/a" || fail "the backing file of a is not what was written"
say "ok"
