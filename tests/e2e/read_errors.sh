#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# read_errors: one unreadable spot in a backing file, as a bad sector makes
# (zr_fault.so, preloaded into the daemon, fails every pread(2) of the file
# that covers byte 300000, in its fifth 64 KiB block, with EIO).
# (1) Reading the whole file through the mount must fail with EIO; what a
# read returns before the error must be the file's bytes, never zeros (a
# short reply would make the kernel cache zeros for the rest of the file).
# (2) The blocks before the bad one read back correctly on their own.
# (3) 100 bytes written to a healthy block; after (4), the fault lifted and
# unmounted, the backing file is the old data plus those bytes.
# (4) The backing filesystem's fsync fails (EIO, as when the device fails a
# write the page cache took): the writer's fsync gets EIO, the blocks the
# tier holds of the file are dirty again, and a later fsync, once the fault
# is lifted, writes them again and succeeds. (5) A reader's fsync meets
# that failure: it gets EIO, and so does the writer's close after it (the
# reader's fsync of the backing fd, which every handle shares, took the
# error from the writer's: its close returned 0; helper-89).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the fault is injected into the daemon"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/orig"
cp "$ZR_TMP/orig" "$B/f"
touch "$ZR_TMP/armed"
# (the daemon may be built with ASan, whose runtime wants to be first)
ZR_FAULT_NAME=f ZR_FAULT_READ_AT=300000 ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_FSYNC=1 \
	zr_mount_fault "block_size=64k" "$B" "$M"
M=$ZR_MNT

say "1: the whole file, in one pass"
if dd if="$M/f" of="$ZR_TMP/got" bs=1M 2>"$ZR_TMP/dd.err"; then
	cmp "$ZR_TMP/orig" "$ZR_TMP/got" && fail "the fault did not fire: the test shows nothing"
	fail "a read over an unreadable block succeeded and returned wrong data"
fi
grep -q "Input/output error" "$ZR_TMP/dd.err" ||
	fail "expected EIO, dd said: $(cat "$ZR_TMP/dd.err")"
got=$(stat -c %s "$ZR_TMP/got")
[ "$got" -lt 300000 ] || fail "dd got $got bytes, past the unreadable byte 300000"
cmp -n "$got" "$ZR_TMP/orig" "$ZR_TMP/got" ||
	fail "the $got bytes read before the error are not the file's"
say "ok: EIO after $got good bytes"

say "2: the four blocks before the bad one"
zr_drop_kcache
dd if="$M/f" of="$ZR_TMP/head" bs=64k count=4 status=none ||
	fail "reading the healthy first 256 KiB failed"
cmp -n $((256 << 10)) "$ZR_TMP/orig" "$ZR_TMP/head" || fail "the first 256 KiB read back wrong"

say "3: a write to a healthy block"
head -c 100 /dev/urandom >"$ZR_TMP/patch"
dd if="$ZR_TMP/patch" of="$M/f" bs=100 seek=6000 conv=notrunc status=none ||
	fail "a write to a healthy block failed"
cp "$ZR_TMP/orig" "$ZR_TMP/want"
dd if="$ZR_TMP/patch" of="$ZR_TMP/want" bs=100 seek=6000 conv=notrunc status=none

say "4: the backing fsync fails"
IO=$(zr_helper zr_io)
"$IO" fsync "$M/f" >"$ZR_TMP/io.out" && fail "fsync succeeded while the backing fsync fails: $(cat "$ZR_TMP/io.out")"
grep -q "fsync error: Input/output error" "$ZR_TMP/io.out" ||
	fail "expected EIO from fsync: $(cat "$ZR_TMP/io.out")"
# the kernel may have given up the pages it could not write: what the tier
# holds of the file is dirty again, and written again by the next fsync
dirty=$(zr_stat blocks_dirty)
[ "${dirty:-1}" -ge 1 ] || fail "no dirty block after a failed fsync ($dirty)"
bw0=$(zr_stat bytes_written_backing)
rm "$ZR_TMP/armed"
"$IO" fsync "$M/f" >"$ZR_TMP/io.out" || fail "fsync failed once the fault was lifted: $(cat "$ZR_TMP/io.out")"
bw1=$(zr_stat bytes_written_backing)
[ "${dirty:-0}" = 0 ] || [ $((bw1 - bw0)) -ge 65536 ] ||
	fail "the fsync after the failed one wrote $((bw1 - bw0)) bytes, not the blocks again"
zr_drop_kcache
cmp "$ZR_TMP/want" "$M/f" || fail "the file reads back wrong once the fault is lifted"
zr_umount
cmp "$ZR_TMP/want" "$B/f" || fail "the backing file is not the old data plus the write"
say "ok: the backing file holds the old data and the write"

say "5: a reader's fsync meets the failure, then the writer closes"
ZR_FAULT_NAME=f ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_FSYNC=1 \
	zr_mount_fault "block_size=64k" "$B" "$M"
M=$ZR_MNT
out=$(python3 - "$M/f" "$ZR_TMP/armed" <<'PY'
import os, sys
path, armed = sys.argv[1], sys.argv[2]
w = os.open(path, os.O_WRONLY)
os.pwrite(w, b"\x5a" * 65536, 0)
os.close(os.open(path, os.O_WRONLY))	# the kernel's pages go to the daemon
open(armed, "w").close()
r = os.open(path, os.O_RDONLY)
try:
    os.fsync(r)
    print("reader fsync ok")
except OSError as e:
    print("reader fsync error:", e.strerror)
os.unlink(armed)
os.close(r)
try:
    os.close(w)
    print("writer close ok")
except OSError as e:
    print("writer close error:", e.strerror)
PY
) || fail "the script failed: $out"
echo "$out" | sed 's/^/     /'
echo "$out" | grep -qx "reader fsync error: Input/output error" ||
	fail "the reader's fsync did not meet the backing fsync's failure: the case is not tested"
echo "$out" | grep -qx "writer close error: Input/output error" ||
	fail "the writer's close did not report the failed fsync that a reader's fsync met"
zr_umount
say "ok"
