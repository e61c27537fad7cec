#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_stat: a GETATTR that comes while a rename of the same object is
# under way. The daemon reaches a symlink (which has no fd) through its
# name; between the backing rename and the change of the daemon's record
# of the names, that name reaches the other file. An exchange of a
# directory d and a symlink s (zr_fault.so's ZR_FAULT_RENAME_DELAY_MS holds
# that moment 1.5 s), and a statx(AT_STATX_FORCE_SYNC) of s in it: the
# daemon answered with the directory's attributes, of another kind, so the
# kernel took the symlink's inode for bad and the statx failed with EIO
# (helper-63). Between files of one kind, the answer was the other file's
# attributes. After the exchange both names must work.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the names are the daemon's"
zr_need_tool python3
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=s ZR_FAULT_RENAME_DELAY_MS=1500 \
	zr_mount_fault "" "$B" "$M"
mkdir "$M/d"
ln -s target "$M/s"
say "exchange of a directory and a symlink, the symlink's attributes asked for in between"
touch "$ZR_TMP/armed"
python3 - "$ZR_MNT" <<'PY' || fail "see above"
import ctypes, os, stat, struct, sys, time
m = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
AT_SYMLINK_NOFOLLOW, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS = 0x100, 0x2000, 0x7ff
SYS_statx = 332

def statx(path):
    buf = ctypes.create_string_buffer(256)
    rc = libc.syscall(SYS_statx, AT_FDCWD, path.encode(),
                      AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC,
                      STATX_BASIC_STATS, buf)
    if rc != 0:
        return os.strerror(ctypes.get_errno())
    return struct.unpack_from("<H", buf.raw, 0x1c)[0]

pid = os.fork()
if pid == 0:
    rc = libc.renameat2(AT_FDCWD, (m + "/d").encode(), AT_FDCWD,
                        (m + "/s").encode(), RENAME_EXCHANGE)
    os._exit(0 if rc == 0 else 1)
time.sleep(0.5)
got = statx(m + "/s")
print("  -- statx of s during the exchange: %s" %
      (got if isinstance(got, str) else oct(stat.S_IFMT(got))))
_, st = os.waitpid(pid, 0)
if st != 0:
    sys.exit("the exchange failed")
bad = []
# s is the symlink before the exchange, the directory after it
if isinstance(got, str):
    bad.append("statx of s during the exchange: %s" % got)
elif stat.S_IFMT(got) not in (stat.S_IFLNK, stat.S_IFDIR):
    bad.append("statx of s during the exchange: a %o" % stat.S_IFMT(got))
for name, want in (("d", stat.S_IFLNK), ("s", stat.S_IFDIR)):
    got = statx(m + "/" + name)
    if isinstance(got, str):
        bad.append("after the exchange, %s: %s" % (name, got))
    elif stat.S_IFMT(got) != want:
        bad.append("after the exchange, %s: a %o, not a %o" % (name, stat.S_IFMT(got), want))
try:
    if os.readlink(m + "/d") != "target":
        bad.append("d does not read as the symlink")
except OSError as e:
    bad.append("readlink d: %s" % e.strerror)
if bad:
    sys.exit("; ".join(bad))
PY
[ ! -e "$ZR_TMP/armed" ] || rm -f "$ZR_TMP/armed"
[ -L "$B/d" ] && [ -d "$B/s" ] || fail "the backing names were not exchanged"
zr_umount
say "ok"
