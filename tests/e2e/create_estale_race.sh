#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# create_estale_race: open(O_CREAT) without O_EXCL of a name that is made,
# removed and made again in the backing directory behind the kernel's
# back. A CREATE that meets a name taken answers ESTALE, and the kernel
# walks the path again once, with LOOKUP_REVAL: a LOOKUP, then, if that
# says the name is free, a second CREATE. When the name is gone at that
# LOOKUP and back at that CREATE, the daemon opens the file itself, as the
# caller would (its uid, groups and access: open_as_caller()); before it
# did, the second CREATE answered ESTALE too, and open(2) failed with
# ESTALE, which it never does on a local filesystem.
# zr_fault.so holds the daemon's O_EXCL create before and after the call
# until the test lets it go on (ZR_FAULT_CREATE_SYNC): the name is removed
# after the first CREATE's call and made again before the second's, so
# after the LOOKUP between them. Cases: root; another user whose open the
# mode refuses or allows, or allows by a supplementary group; the name
# gone again before the daemon's open, which then makes the file as the
# caller's (uid, gid; root in another group); an append-only file (EPERM
# without O_APPEND, helper-80's review: an EPERM was once taken for an
# fd); O_TRUNC; a note the walk again did not use, forgotten at the
# thread's OPEN. (A loop that makes and removes a name in the backing
# directory while another opens it with O_CREAT, and removes it, through
# the mount sees the same race: half of its opens failed with ESTALE
# before open_as_caller(), 2-3% after, where the file had gone again
# before the kernel's OPEN.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the delay is injected into the daemon"
zr_need_root "switches to another user"
zr_need_tool python3
zr_need_tool setpriv
zr_need_tool chattr
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
chmod 0755 "$ZR_TMP" "$B" "$M"
SYNC=$ZR_TMP/sync
mkdir "$SYNC"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=n ZR_FAULT_CREATE_DELAY_MS=1 ZR_FAULT_CREATE_SYNC=$SYNC \
	zr_mount_fault "allow_other" "$B" "$M"
M=$ZR_MNT

# race DIR MODE WHO FLAGS [vanish]: DIR/n, absent to the kernel, is made
# behind its back with mode MODE and "behind" in it; WHO (root, nobody, or
# root4242: uid 0 in group 4242, nobody4343: nobody with supplementary
# group 4343) opens it through the mount with O_CREAT
# and FLAGS (w: O_WRONLY, r: O_RDONLY, t: O_WRONLY|O_TRUNC, a:
# O_WRONLY|O_APPEND) while the name is removed and made again (mode MODE,
# "again"; MODE+a: append-only as well, chattr +a; MODE+g: of group 4343,
# which nobody4343 has as a supplementary group); with vanish, removed
# once more right after the second CREATE met it, so that the daemon's
# open as the caller makes it. Prints what the open gave (ok or an errno
# name).
race() {
	local d=$1 mode=$2 who=$3 flags=$4 vanish=${5:-} as=()
	mkdir -m 0777 "$M/$d"
	chmod 0777 "$M/$d"
	! stat "$M/$d/n" >/dev/null 2>&1 || fail "$d/n exists"	# a negative entry
	echo behind >"$B/$d/n"
	chmod "${mode%%+*}" "$B/$d/n"
	case $who in
	nobody) as=(setpriv --reuid=65534 --regid=65534 --clear-groups --) ;;
	root4242) as=(setpriv --regid=4242 --clear-groups --) ;;
	nobody4343) as=(setpriv --reuid=65534 --regid=65534 --groups=4343 --) ;;
	esac
	touch "$ZR_TMP/armed"
	python3 - "$M/$d/n" "$B/$d/n" "$mode" "$flags" "$SYNC" "$vanish" "${as[@]}" <<'PY'
import os, subprocess, sys, time
mnt, back, mode, flags, sync, vanish = sys.argv[1:7]
as_user = sys.argv[7:]
fl = {"w": "os.O_WRONLY", "r": "os.O_RDONLY", "t": "os.O_WRONLY | os.O_TRUNC",
      "a": "os.O_WRONLY | os.O_APPEND"}[flags]
opener = ("import errno, os, sys\n"
          "try:\n    os.close(os.open(sys.argv[1], os.O_CREAT | %s, 0o644))\n    print('ok')\n"
          "except OSError as e:\n    print(errno.errorcode[e.errno])\n" % fl)
p = subprocess.Popen(as_user + ["/usr/bin/python3", "-c", opener, mnt],
                     stdout=subprocess.PIPE, text=True)

def held(what):
    """The number of the daemon's hold that waits, or exit if none comes."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:
        for f in os.listdir(sync):
            if f.startswith("held.") and not os.path.exists(sync + "/go." + f[5:]):
                return f[5:]
        if p.poll() is not None and time.monotonic() - t0 > 1:
            break
        time.sleep(0.001)
    p.kill()
    sys.exit("no hold %s (the open gave: %s)" % (what, p.stdout.read().strip()))

def go(k):
    open(sync + "/go." + k, "w").close()

go(held("before the first CREATE's call"))	# the name is there
k = held("after the first CREATE's call")	# it met the name: ESTALE next
os.unlink(back)					# the kernel's LOOKUP finds it free
go(k)
k = held("before the second CREATE's call")
with open(back, "w") as f:			# made again before the call
    f.write("again\n")
os.chmod(back, int(mode.split("+")[0], 8))
if "+g" in mode:				# group 4343
    os.chown(back, 0, 4343)
if "+a" in mode:				# append-only
    subprocess.run(["chattr", "+a", back], check=True)
go(k)
k = held("after the second CREATE's call")
if vanish:
    os.unlink(back)				# gone before the daemon opens it
go(k)
res = p.stdout.read().strip()
p.wait()
sys.stderr.write("     %s: open(O_CREAT) %s\n" % (mnt, res))
print(res)
PY
	rm -f "$ZR_TMP/armed"
}

say "root opens a name made again behind the back"
r=$(race d1 0644 root w)
[ "$r" = ok ] || fail "root's open(O_CREAT) of a name made and removed behind the back: $r"
[ "$(cat "$M/d1/n")" = again ] || fail "d1/n holds '$(cat "$M/d1/n")', not what was made behind the back"

[ "$(zr_stat creates_stale)" = 1 ] && [ "$(zr_stat creates_as_caller)" = 1 ] ||
	fail "creates_stale $(zr_stat creates_stale), creates_as_caller $(zr_stat creates_as_caller) after one race, not 1 and 1"

say "another user's open is checked as its own would be"
r=$(race d2 0600 nobody w)
[ "$r" = EACCES ] || fail "nobody's open(O_CREAT|O_WRONLY) of root's 0600 file: $r, not EACCES"
r=$(race d3 0666 nobody w)
[ "$r" = ok ] || fail "nobody's open(O_CREAT|O_WRONLY) of root's 0666 file: $r"
[ "$(stat -c %u "$M/d3/n")" = 0 ] || fail "d3/n changed owner"
r=$(race d4 0644 nobody r)
[ "$r" = ok ] || fail "nobody's open(O_CREAT|O_RDONLY) of root's 0644 file: $r"
r=$(race d11 0660+g nobody4343 w)
[ "$r" = ok ] || fail "nobody's open(O_CREAT|O_WRONLY), in group 4343, of a 0660 file of group 4343: $r"
r=$(race d12 0660+g nobody w)
[ "$r" = EACCES ] || fail "nobody's open(O_CREAT|O_WRONLY), not in group 4343, of a 0660 file of group 4343: $r, not EACCES"
r=$(race d5 0644 nobody t)
[ "$r" = EACCES ] || fail "nobody's open(O_CREAT|O_TRUNC) of root's 0644 file: $r, not EACCES"
# (the kernel keeps its negative entry for a name whose open failed)
[ "$(cat "$B/d5/n")" = again ] || fail "a refused O_TRUNC open truncated d5/n"

say "a name gone again is made by the open, as its caller's"
r=$(race d7 0600 nobody w vanish)
[ "$r" = ok ] || fail "nobody's open(O_CREAT) of a name gone again: $r"
[ "$(stat -c %u:%g:%a:%s "$B/d7/n")" = 65534:65534:644:0 ] ||
	fail "d7/n, made by nobody's open: $(stat -c %u:%g:%a:%s "$B/d7/n"), not 65534:65534:644:0"
r=$(race d8 0600 root4242 w vanish)
[ "$r" = ok ] || fail "root's (group 4242) open(O_CREAT) of a name gone again: $r"
[ "$(stat -c %u:%g "$B/d8/n")" = 0:4242 ] ||
	fail "d8/n, made by root's open in group 4242: owner $(stat -c %u:%g "$B/d8/n"), not 0:4242"

say "an append-only file: EPERM without O_APPEND, as the kernel's open gives"
ZR_ATEXIT+=("chattr -a '$B/d9/n' '$B/d10/n' 2>/dev/null")
r=$(race d9 0644+a root w)
[ "$r" = EPERM ] || fail "root's open(O_CREAT|O_WRONLY) of an append-only file: $r, not EPERM"
r=$(race d10 0644+a root a)
[ "$r" = ok ] || fail "root's open(O_CREAT|O_WRONLY|O_APPEND) of an append-only file: $r"
chattr -a "$B/d9/n" "$B/d10/n"

say "O_TRUNC empties the file it opens"
# (d6 below makes the twelfth race)
[ "$(zr_stat creates_as_caller)" = 11 ] ||
	fail "creates_as_caller $(zr_stat creates_as_caller) after eleven races, not 11"
r=$(race d6 0644 root t)
[ "$r" = ok ] || fail "root's open(O_CREAT|O_TRUNC): $r"
[ "$(stat -c %s "$M/d6/n")" = 0 ] || fail "d6/n has $(stat -c %s "$M/d6/n") bytes after O_TRUNC"

# A note the walk again did not use is forgotten at the thread's OPEN: one
# thread opens a name made behind the back (ESTALE, then the kernel's LOOKUP
# finds it and sends OPEN), removes it through the mount, and within 2 s
# opens it again after it was made behind the back once more. That second
# CREATE is a first meeting, for the kernel to open (ESTALE again), not
# the walk again of the first (the note kept 2 s had it opened as the
# caller).
say "an unused note is forgotten at the thread's OPEN"
stale0=$(zr_stat creates_stale) caller0=$(zr_stat creates_as_caller)
mkdir "$M/d13"
python3 - "$M/d13/n" "$B/d13/n" <<'PY' || fail "the open-remove-open of d13/n failed"
import os, sys
mnt, back = sys.argv[1:3]
for text in ("one\n", "two\n"):
    try:
        os.stat(mnt)
        sys.exit("d13/n exists")
    except FileNotFoundError:
        pass				# a negative entry
    with open(back, "w") as f:		# made behind the back
        f.write(text)
    fd = os.open(mnt, os.O_CREAT | os.O_RDWR, 0o644)
    got = os.read(fd, 100).decode()
    os.close(fd)
    if got != text:
        sys.exit("d13/n read %r, not what was made behind the back, %r" % (got, text))
    if text == "one\n":
        os.unlink(mnt)
PY
[ "$(zr_stat creates_stale)" = $((stale0 + 2)) ] && [ "$(zr_stat creates_as_caller)" = "$caller0" ] ||
	fail "creates_stale $stale0 -> $(zr_stat creates_stale), creates_as_caller $caller0 -> $(zr_stat creates_as_caller): the second CREATE was taken for the walk again of the first"
zr_umount
[ "$(stat -c %s "$B/d6/n")" = 0 ] || fail "d6/n in the backing directory has $(stat -c %s "$B/d6/n") bytes after O_TRUNC"

# A root daemon without CAP_SETUID and CAP_SETGID (capsh drops them from
# its bounding set before it runs) cannot take another caller's
# credentials: that caller's open must not be made with the daemon's
# (ESTALE instead, as DESIGN-NOTES says), and nothing it could not open is
# changed. A root caller needs no switch and still gets its file.
if command -v capsh >/dev/null; then
	say "a daemon that cannot take a caller's credentials opens nothing for it"
	printf '#!/bin/sh\nexec capsh --drop=cap_setuid,cap_setgid -- -c %s "%s" "$@"\n' \
		"'exec \"\$0\" \"\$@\"'" "$ZRAMFS" >"$ZR_TMP/zramfs-nocreds"
	chmod +x "$ZR_TMP/zramfs-nocreds"
	SYNC=$ZR_TMP/sync2	# (a new daemon numbers its holds from 1 again)
	mkdir "$SYNC"
	ZRAMFS=$ZR_TMP/zramfs-nocreds ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=n \
		ZR_FAULT_CREATE_DELAY_MS=1 ZR_FAULT_CREATE_SYNC=$SYNC \
		zr_mount_fault "allow_other" "$B" "$M"
	M=$ZR_MNT
	eff=$(awk '/^CapEff:/ { print $2 }' "/proc/$ZR_PID/status")
	# (CAP_SETGID is bit 6, CAP_SETUID bit 7)
	[ $((0x$eff & 0xc0)) = 0 ] || fail "the daemon kept CAP_SETUID or CAP_SETGID: CapEff $eff"
	r=$(race d14 0600 nobody w)
	[ "$r" = ESTALE ] || fail "nobody's open(O_CREAT|O_WRONLY) of root's 0600 file, through a daemon that cannot switch: $r, not ESTALE"
	[ "$(stat -c %u:%a "$B/d14/n"):$(cat "$B/d14/n")" = 0:600:again ] ||
		fail "d14/n is now $(stat -c %u:%a "$B/d14/n"):$(cat "$B/d14/n"), not 0:600:again"
	r=$(race d15 0600 nobody w vanish)
	[ "$r" = ESTALE ] || fail "nobody's open(O_CREAT) of a name gone again, through a daemon that cannot switch: $r, not ESTALE"
	[ ! -e "$B/d15/n" ] || fail "d15/n was made for nobody by a daemon that cannot switch: $(stat -c %u:%g:%a "$B/d15/n")"
	r=$(race d16 0644 root w)
	[ "$r" = ok ] || fail "root's open(O_CREAT) through a daemon without CAP_SETUID: $r"
	grep -q "cannot take a caller's" "$ZR_LOG" || fail "the daemon did not log that it cannot take a caller's credentials"
	zr_umount
else
	say "skipped: the daemon without CAP_SETUID (capsh missing; README installs libcap2-bin)"
fi
say "ok: open(O_CREAT) opened the file made behind the back, as its caller"
