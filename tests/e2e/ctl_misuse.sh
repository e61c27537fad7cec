#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ctl_misuse: every system call a user can aim at the hidden .zramfs
# directory and its files (stats, config, control) gets an answer, and the
# daemon lives on with the data it holds: lseek(SEEK_DATA) on stats read a
# control file's node id as an inode and killed the daemon (SIGSEGV), which
# took every dirty block with it (helper-37's review). Nothing may be
# created, renamed, linked or removed there, and nothing reaches the
# backing directory under that name. The calls are made as root, who
# passes every permission check, so each reaches the daemon.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the control directory is the daemon's"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/data"
zr_mount "dirty_expire=1h,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
cp "$ZR_TMP/data" "$M/held"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks: the data at stake is not tested"

say "system calls on .zramfs, its files and names inside it"
python3 - "$M" "$ZR_PID" >"$ZR_TMP/calls" 2>&1 <<'PY' || { cat "$ZR_TMP/calls" >&2; fail "the calls did not run to their end"; }
import errno, fcntl, os, sys
mnt, pid = sys.argv[1], int(sys.argv[2])
C = mnt + "/.zramfs"
ran = 0

def alive(what):
    try:
        os.kill(pid, 0)
        os.stat(mnt + "/held")
    except OSError as e:
        print("DEAD after %s: %s" % (what, e))
        sys.exit(1)

def call(what, f, *a):
    global ran
    ran += 1
    try:
        r = f(*a)
        print("%-40s -> %r" % (what, r))
    except OSError as e:
        print("%-40s -> %s" % (what, errno.errorcode.get(e.errno, e.errno)))
    alive(what)

for name in ("stats", "config"):
    p = C + "/" + name
    fd = os.open(p, os.O_RDONLY)
    for wh, wn in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
        for off in (0, 1, 4096):
            call("lseek %s %s %d" % (name, wn, off), os.lseek, fd, off, wh)
    call("lseek %s SEEK_END" % name, os.lseek, fd, 0, os.SEEK_END)
    call("fsync " + name, os.fsync, fd)
    call("fdatasync " + name, os.fdatasync, fd)
    call("flock " + name, fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    call("lockf " + name, fcntl.lockf, fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    call("fallocate " + name, os.posix_fallocate, fd, 0, 4096)
    call("ftruncate " + name, os.ftruncate, fd, 0)
    call("pread " + name, os.pread, fd, 100, 1 << 20)
    out = os.open(mnt + "/copy-" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    call("copy_file_range from " + name, os.copy_file_range, fd, out, 4096)
    os.close(out)
    inp = os.open(mnt + "/held", os.O_RDONLY)
    call("copy_file_range held to " + name, os.copy_file_range, inp, fd, 4096)
    os.close(inp)
    call("fchmod " + name, os.fchmod, fd, 0o777)
    call("fchown " + name, os.fchown, fd, 1, 1)
    call("futimes " + name, os.utime, fd, (0, 0))
    os.close(fd)
    call("truncate " + name, os.truncate, p, 0)
    call("chmod " + name, os.chmod, p, 0o777)
    call("chown " + name, os.chown, p, 1, 1)
    call("utime " + name, os.utime, p, (0, 0))
    call("setxattr " + name, os.setxattr, p, "user.x", b"1")
    call("getxattr " + name, os.getxattr, p, "user.x")
    call("listxattr " + name, os.listxattr, p)
    call("removexattr " + name, os.removexattr, p, "user.x")
    call("readlink " + name, os.readlink, p)
    call("open O_RDWR " + name, os.open, p, os.O_RDWR)
    call("open O_TRUNC " + name, os.open, p, os.O_WRONLY | os.O_TRUNC)
    call("open O_DIRECTORY " + name, os.open, p, os.O_RDONLY | os.O_DIRECTORY)
    call("unlink " + name, os.unlink, p)
    call("rename " + name + " out", os.rename, p, mnt + "/moved-" + name)
    call("link " + name + " out", os.link, p, mnt + "/linked-" + name)
    call("mknod over " + name, os.mknod, p, 0o600)

fd = os.open(C + "/control", os.O_WRONLY)
for wh in (os.SEEK_DATA, os.SEEK_HOLE):
    call("lseek control %d" % wh, os.lseek, fd, 0, wh)
call("fsync control", os.fsync, fd)
call("fallocate control", os.posix_fallocate, fd, 0, 4096)
call("ftruncate control", os.ftruncate, fd, 0)
os.close(fd)

call("chmod .zramfs", os.chmod, C, 0o777)
call("utime .zramfs", os.utime, C, (0, 0))
call("setxattr .zramfs", os.setxattr, C, "user.x", b"1")
call("listxattr .zramfs", os.listxattr, C)
call("rmdir .zramfs", os.rmdir, C)
call("rename .zramfs", os.rename, C, mnt + "/moved")
call("rename into .zramfs", os.rename, mnt + "/held", C + "/held")
call("mkdir in .zramfs", os.mkdir, C + "/d")
call("mknod in .zramfs", os.mknod, C + "/n", 0o600)
call("mkfifo in .zramfs", os.mkfifo, C + "/p")
call("symlink in .zramfs", os.symlink, "stats", C + "/l")
call("link into .zramfs", os.link, mnt + "/held", C + "/h")
call("create in .zramfs", os.open, C + "/new", os.O_WRONLY | os.O_CREAT, 0o644)
call("lookup missing in .zramfs", os.stat, C + "/nothing")
fd = os.open(C, os.O_RDONLY | os.O_DIRECTORY)
call("fsync .zramfs", os.fsync, fd)
call("lseek .zramfs", os.lseek, fd, 0, os.SEEK_DATA)
call("listdir .zramfs", os.listdir, C)
call("fchmod .zramfs", os.fchmod, fd, 0o700)
os.close(fd)
call("statvfs .zramfs", os.statvfs, C)
call("mkdir .zramfs over", os.mkdir, C)
print("ran %d calls" % ran)
PY
sed 's/^/     /' "$ZR_TMP/calls"	# (what each call said, for the log)
zr_running "$ZR_PID" || fail "the daemon died: $(tail -3 "$ZR_LOG")"
# nothing made, moved or linked into .zramfs; nothing by that name on disk
ls "$M/.zramfs" | LC_ALL=C sort | tr '\n' ' ' >"$ZR_TMP/ls"
[ "$(cat "$ZR_TMP/ls")" = "config control stats " ] ||
	fail ".zramfs holds '$(cat "$ZR_TMP/ls")', not just its three files"
[ ! -e "$B/.zramfs" ] || fail "a .zramfs entry reached the backing directory"
cmp -s "$ZR_TMP/data" "$M/held" || fail "held changed"
grep -q '^orig_data_size ' "$M/.zramfs/stats" || fail "stats no longer reads"
# a command with a newline inside is refused, and logged on one line
# (one write(2): each write is one command)
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, b"compact\nzr-forged line\n")
except OSError:
    sys.exit(1)' "$M/.zramfs/control" && fail "a command with a newline inside was taken"
grep -q '^zr-forged line' "$ZR_LOG" && fail "a control command wrote a line of its own in the log"
grep -q "control: 'compact?zr-forged line'" "$ZR_LOG" ||
	fail "the refused command is not in the log, its newline as '?'"
zr_umount
cmp -s "$ZR_TMP/data" "$B/held" || fail "held is not whole in the backing directory after the unmount"
say "ok: the daemon answered every call, and its data is on disk"
