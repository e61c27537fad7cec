#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# create_estale_race: open(O_CREAT) without O_EXCL of a name that is made,
# removed and made again in the backing directory behind the kernel's
# back. Since 846a8fc a CREATE that meets a name taken answers ESTALE, and
# the kernel walks the path again once, with LOOKUP_REVAL: a LOOKUP, then,
# if that says the name is free, a second CREATE. When the name is gone at
# that LOOKUP and back at that CREATE, the second CREATE answers ESTALE
# too, and open(2) fails with ESTALE, which it never does on a local
# filesystem (nor did it here before: the daemon opened what it found).
# zr_fault.so holds the daemon's O_EXCL create 400 ms before and after the
# call; the name is removed between the two CREATEs' calls and made again
# after the LOOKUP between them. (A loop that makes and removes a name in
# the backing directory while another opens it with O_CREAT through the
# mount sees the same: a quarter of the opens failed with ESTALE.)
# Expected to fail until a CREATE met by such a race opens the file.  Not
# in make check (it orders its steps with sleeps): run it by hand with
# ZRAMFS=... TOP_BUILDDIR=... bash tests/e2e/create_estale_race.sh.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the delay is injected into the daemon"
zr_need_tool python3
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=n ZR_FAULT_CREATE_DELAY_MS=400 \
	LD_PRELOAD=$FAULT ASAN_OPTIONS=verify_asan_link_order=0 \
	zr_mount "" "$B" "$M"
M=$ZR_MNT

mkdir "$M/d"
! stat "$M/d/n" 2>/dev/null || fail "d/n exists"	# a negative entry
echo behind >"$B/d/n"
touch "$ZR_TMP/armed"
python3 - "$M/d/n" "$B/d/n" <<'PY' || fail "open(O_CREAT) of a name made and removed behind the back failed"
import errno, os, sys, threading, time
mnt, back = sys.argv[1:3]
res = []
def opener():
    try:
        os.close(os.open(mnt, os.O_CREAT | os.O_WRONLY, 0o644))
        res.append("ok")
    except OSError as e:
        res.append(errno.errorcode[e.errno])
t0 = time.monotonic()
t = threading.Thread(target=opener)
t.start()
# first CREATE: its O_EXCL call at 0.4 s meets the name, ESTALE at 0.8 s;
# the kernel's LOOKUP at 0.8 s; the second CREATE's call at 1.2 s
time.sleep(0.6)
os.unlink(back)
time.sleep(max(0, 1.0 - (time.monotonic() - t0)))
with open(back, "w") as f:
    f.write("again\n")
t.join()
print("     open(O_CREAT): %s after %.1f s" % (res[0], time.monotonic() - t0))
sys.exit(0 if res[0] == "ok" else 1)
PY
rm -f "$ZR_TMP/armed"
zr_umount
say "ok: open(O_CREAT) opened the file made behind the back"
