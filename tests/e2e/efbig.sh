#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# efbig: writes past the largest file the backing filesystem takes (ext4:
# 2^32 - 1 blocks).  The limit is found first on the image itself.  Through
# the mount: 800 bytes that straddle it, then 10 bytes past it.  Each must
# fail (EFBIG) at write() or, as the kernel's writeback cache accepts them
# first, at fsync(); the bytes below the limit land on disk; and since the
# daemon keeps nothing it could never write back, it exits at once when
# unmounted (it keeps data it cannot write back for as long as it runs).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the limit is the daemon's to apply"
zr_need_tool mkfs.ext4 python3 cmp

IMG=$ZR_TMP/ext4.img B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
truncate -s 64M "$IMG"
mkfs.ext4 -q -F "$IMG" || fail "mkfs.ext4 failed"
mount -o loop "$IMG" "$B" || zr_skip "cannot mount a loop device here"

# the largest size ftruncate takes on the image: a binary search
LIMIT=$(python3 - "$B/probe" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
lo, hi = 0, (1 << 63) - 1
while hi - lo > 1:
    mid = (lo + hi) // 2
    try:
        os.ftruncate(fd, mid)
        lo = mid
    except OSError:
        hi = mid
os.close(fd)
os.unlink(sys.argv[1])
print(lo)
PY
) || fail "cannot probe the image's largest file"
say "largest file on the ext4 image: $LIMIT bytes"
[ "$LIMIT" -lt $((1 << 62)) ] || fail "no file size limit found on ext4: the test shows nothing"

zr_mount "size=16M,block_size=4k,dirty_expire=1h" "$B" "$M"

# write_at FILE OFF LEN: pwrite LEN bytes of 0xab at OFF, then fsync and
# close; prints "wrote N" or "write ERRNO", then "fsync ok|ERRNO"
write_at() {
	python3 - "$@" <<'PY'
import errno, os, sys
p, off, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
try:
    print("wrote", os.pwrite(fd, b"\xab" * n, off))
except OSError as e:
    print("write", errno.errorcode[e.errno])
try:
    os.fsync(fd)
    print("fsync ok")
except OSError as e:
    print("fsync", errno.errorcode[e.errno])
try:
    os.close(fd)
except OSError:
    pass
PY
}

say "800 bytes at LIMIT - 100"
out=$(write_at "$ZR_MNT/f" $((LIMIT - 100)) 800)
echo "$out" | sed 's/^/     /'
case "$out" in
"wrote 100"*"fsync ok") ;;	# a short write, as ext4 itself does
*"fsync EFBIG") ;;		# accepted by the writeback cache, refused at fsync
*) fail "expected a short write or EFBIG at fsync, got: $(echo $out)" ;;
esac

say "10 bytes at LIMIT + 10"
out=$(write_at "$ZR_MNT/g" $((LIMIT + 10)) 10)
echo "$out" | sed 's/^/     /'
echo "$out" | grep -Eq "^(write|fsync) EFBIG$" || fail "expected EFBIG, got: $(echo $out)"

say "unmount: nothing is held that cannot be written back"
zr_umount
[ "$(stat -c %s "$B/f")" = "$LIMIT" ] ||
	fail "f is $(stat -c %s "$B/f") bytes on disk, expected $LIMIT"
python3 - "$B/f" "$LIMIT" <<'PY' || fail "the 100 bytes below the limit are not on disk"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(0 if os.pread(fd, 100, int(sys.argv[2]) - 100) == b"\xab" * 100 else 1)
PY
umount "$B" || fail "cannot unmount the ext4 image"

say "a daemon under ulimit -f (64 MiB): mounts, and a write past it is EFBIG"
# (the size probe and the writeback meet RLIMIT_FSIZE; without SIGXFSZ
# ignored, the daemon died at mount)
cat >"$ZR_TMP/fsize_limited" <<SH
#!/bin/bash
ulimit -f $((64 << 10)) && exec "$ZRAMFS" "\$@"
SH
chmod +x "$ZR_TMP/fsize_limited"
REAL=$ZRAMFS ZRAMFS=$ZR_TMP/fsize_limited
mkdir -p "$ZR_TMP/b2"
zr_mount "size=16M" "$ZR_TMP/b2" "$M"
ZRAMFS=$REAL
out=$(write_at "$ZR_MNT/h" $((100 << 20)) 4096)
echo "$out" | sed 's/^/     /'
echo "$out" | grep -Eq "^(write|fsync) EFBIG$" || fail "expected EFBIG past the daemon's file size limit, got: $(echo $out)"
echo small >"$ZR_MNT/small" || fail "the mount stopped working"
zr_umount
[ "$(cat "$ZR_TMP/b2/small")" = small ] || fail "a small file was lost"
say "ok"
