#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# tmpfile: open(2) with O_TMPFILE works on zramfs as on tmpfs.  One
# scenario runs in the mount and in a tmpfs, and their transcripts must be
# equal: a file made with O_TMPFILE has no name (link count 0, not listed),
# takes the mode less the umask, holds what is written (16 MiB of random
# data through a 4 MiB budget, so blocks leave RAM while it has no name),
# gets a name with linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N and keeps
# what is written after; one made with O_EXCL cannot be linked (ENOENT);
# Python's tempfile.TemporaryFile (O_TMPFILE first) works; another user's
# is that user's, and a setgid directory's group goes to it.  Then: no
# file is left in the orphan directory, by which a file is reached until a
# link or its last close; O_TMPFILE in a directory on another filesystem
# fails with EOPNOTSUPP; the linked files are in the backing directory
# with their data after the unmount, and nothing else is (no file that was
# never linked, and the orphan directory is gone).  Before, FUSE_TMPFILE
# was answered ENOSYS and O_TMPFILE failed with EOPNOTSUPP.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "FUSE_TMPFILE is served by the daemon"
zr_need_root "switches to another user and mounts a tmpfs"
zr_need_tool python3 setpriv
U=65534

B=$ZR_TMP/backing M=$ZR_TMP/mnt T=$ZR_TMP/tmpfs
mkdir -p "$B" "$M"
chmod 0755 "$ZR_TMP" "$B" "$M"
zr_mount_tmpfs "$T" 64m

# tmpfile_py DIR NAME SIZE [EXCL]: makes an O_TMPFILE file in DIR, writes
# SIZE bytes of seeded random data, prints what it sees, links it as
# DIR/NAME (unless EXCL), appends a line, prints the sha256 of it all.
tmpfile_py() {
	python3 - "$@" <<'EOF'
import ctypes, hashlib, os, random, stat, sys
d, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
excl = len(sys.argv) > 4
libc = ctypes.CDLL(None, use_errno=True)
def link_fd(fd, dst):
    if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, dst.encode(), 0x400) != 0:
        return os.strerror(ctypes.get_errno())
    return "ok"
flags = os.O_TMPFILE | os.O_RDWR | (os.O_EXCL if excl else 0)
fd = os.open(d, flags, 0o666)
data = random.Random(size).randbytes(size)
for off in range(0, size, 1 << 20):
    os.pwrite(fd, data[off:off + (1 << 20)], off)
st = os.fstat(fd)
print(f"{name}: nlink {st.st_nlink} mode {stat.filemode(st.st_mode)} size {st.st_size}"
      f" uid {st.st_uid} gid {st.st_gid}")
print(f"{name}: listed {sorted(e for e in os.listdir(d) if e != '.zramfs')}")
back = b"".join(os.pread(fd, 1 << 20, off) for off in range(0, size, 1 << 20))
print(f"{name}: reads back {back == data}")
print(f"{name}: link {link_fd(fd, os.path.join(d, name))}")
os.write(fd, b"after the link\n")
print(f"{name}: nlink now {os.fstat(fd).st_nlink}")
os.close(fd)
p = os.path.join(d, name)
if os.path.exists(p):
    with open(p, "rb") as f:
        print(f"{name}: sha256 {hashlib.sha256(f.read()).hexdigest()}")
    print(f"{name}: {stat.filemode(os.stat(p).st_mode)} nlink {os.stat(p).st_nlink}")
EOF
}

# scenario DIR: what a user sees of O_TMPFILE in DIR
scenario() {
	local d=$1
	(
		set +e
		cd "$d" || exit 1
		umask 022
		mkdir sub shared group
		chmod 1777 shared
		chown 0:$U group && chmod 2775 group
		tmpfile_py "$d" small 5000
		tmpfile_py "$d/sub" big 16777216
		tmpfile_py "$d" excl 1000 excl
		echo "listed: $(ls -A "$d" | grep -v '^.zramfs$' | tr '\n' ' ')"
		python3 -c '
import sys, tempfile
with tempfile.TemporaryFile(dir=sys.argv[1]) as f:
    f.write(b"abc" * 100000); f.seek(0)
    print("TemporaryFile reads back", f.read() == b"abc" * 100000)
' "$d"
		setpriv --reuid=$U --regid=$U --clear-groups -- bash -c "$(declare -f tmpfile_py); umask 077; tmpfile_py '$d/shared' nobodys 3000"
		tmpfile_py "$d/group" grouped 100
		echo "listed at the end: $(ls -A "$d" | grep -v '^.zramfs$' | tr '\n' ' ')"
	) 2>&1
}

say "the same O_TMPFILE scenario on zramfs (size=4m) and on tmpfs"
zr_mount "allow_other,size=4m" "$B" "$M"
M=$ZR_MNT
scenario "$M" >"$ZR_TMP/zramfs.out"
scenario "$T" >"$ZR_TMP/tmpfs.out"
sed 's/^/     /' "$ZR_TMP/zramfs.out"
if ! diff -u "$ZR_TMP/tmpfs.out" "$ZR_TMP/zramfs.out" >"$ZR_TMP/diff"; then
	cat "$ZR_TMP/diff" >&2
	fail "O_TMPFILE behaves differently on zramfs and on tmpfs (diff above: - tmpfs, + zramfs)"
fi
grep -q "big: reads back True" "$ZR_TMP/zramfs.out" || fail "the scenario did not run: no 'big: reads back True'"
grep -q "excl: link No such file or directory" "$ZR_TMP/zramfs.out" ||
	fail "a file made with O_TMPFILE|O_EXCL was linked"

if zr_stats_on; then
	say "the big file's blocks left RAM while it had no name"
	out=$(zr_stat bytes_written_backing)
	[ "${out:-0}" -gt 4000000 ] || fail "bytes_written_backing is ${out:-0}: the 16 MiB file stayed in a 4 MiB budget?"
	# a linked file's orphan name goes at the link, the others' at their
	# last close: none is left while the kernel still holds the files
	[ "$(zr_stat orphans)" = 0 ] || fail "orphans is $(zr_stat orphans) once every file is closed or linked"
	left=$(ls -A "$B/.zramfs/unlinked" 2>/dev/null | tr '\n' ' ')
	[ -z "$left" ] || fail "the orphan directory holds: $left"
fi

say "O_TMPFILE in a directory on another filesystem: EOPNOTSUPP"
# (the orphan's name cannot be linked across filesystems)
mkdir "$B/other"
mount -t tmpfs -o size=1m tmpfs "$B/other" || fail "cannot mount a tmpfs on $B/other"
python3 -c '
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)
    print("opened")
except OSError as e:
    print("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])
' "$M/other" >"$ZR_TMP/other.out"
[ "$(cat "$ZR_TMP/other.out")" = EOPNOTSUPP ] ||
	fail "O_TMPFILE under a mount in the backing tree: $(cat "$ZR_TMP/other.out"), expected EOPNOTSUPP"

say "after the unmount: the linked files in the backing directory, nothing else"
zr_sums "$M" >"$ZR_TMP/sums"
zr_umount
zr_same_sums "$ZR_TMP/sums" "$B" "the backing directory after the unmount"
[ ! -e "$B/.zramfs" ] || fail "the backing directory still has .zramfs: $(ls -lAR "$B/.zramfs")"
umount -l "$B/other" || fail "cannot unmount $B/other"
left=$(cd "$B" && find . -type f | sort | tr '\n' ' ')
[ "$left" = "./group/grouped ./shared/nobodys ./small ./sub/big " ] ||
	fail "the backing directory holds: $left"
[ "$(stat -c %u:%g "$B/shared/nobodys")" = "$U:$U" ] ||
	fail "the backing file made by user $U is owned by $(stat -c %u:%g "$B/shared/nobodys")"
[ "$(stat -c %g "$B/group/grouped")" = "$U" ] ||
	fail "the file made in a setgid directory has group $(stat -c %g "$B/group/grouped") in the backing directory"
say "ok"
