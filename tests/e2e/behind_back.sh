#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# behind_back: files whose data is still dirty in the tier are renamed or
# removed in the backing directory itself, behind the daemon's back (an
# `rm -rf` or `mv` of the backing tree right after umount, a script that
# works on both sides, a symlink or directory put where a file was).  The
# daemon knows a file by its names, which then reach nothing (ENOENT,
# ELOOP, EISDIR): it must find a renamed file through the handle it took
# (data written back under the new name, by the control command, by
# fsync(2) and by the final writeback at unmount), and tell a removed file
# from a renamed one (its data has no home: dropped, as an unlink drops
# it), so that the unmount ends instead of retrying for ever.  On ramfs,
# whose answers are not trusted (NFS and FUSE are not either), no handle is
# used: a renamed file's data stays dirty until its name is back, and a
# hard-linked file is reached through whichever of its names still works.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "renames and removes files behind the daemon's back"
zr_need_root "opening files by handle needs CAP_DAC_READ_SEARCH"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
N=48
for i in $(seq $N); do head -c 9000 /dev/urandom >"$ZR_TMP/src$i"; done

# fill DIR COUNT: small files written through the mount, so that the fd
# cache (max_fds=16) has long forgotten the files written before them
fill() {
	mkdir -p "$1"
	for i in $(seq "$2"); do echo "filler $i" >"$1/f$i"; done
}

# max_fds=16: almost no file keeps its fd, each is reopened by its names
zr_mount "max_fds=16,block_size=4k,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
if grep -q "not opened by handle on this backing filesystem" "$ZR_LOG"; then
	zr_skip "files are not opened by handle on the backing filesystem here (TMPDIR=${TMPDIR:-/tmp}): $(cat "$ZR_LOG")"
fi

say "$N files renamed, $N removed and a directory renamed, behind the daemon's back"
mkdir "$M/ren" "$M/del" "$M/top" "$M/top/sub"
for i in $(seq $N); do
	cp "$ZR_TMP/src$i" "$M/ren/r$i"
	cp "$ZR_TMP/src$i" "$M/del/d$i"
done
cp "$ZR_TMP/src1" "$M/top/sub/deep"
fill "$M/fill1" 64
[ "$(zr_stat fds_open)" -le 16 ] || fail "fds_open $(zr_stat fds_open) above max_fds=16"
dirty=$(zr_stat blocks_dirty)
[ "$dirty" -ge $((N * 2 * 2)) ] || fail "only $dirty dirty blocks: the case is not tested"
for i in $(seq $N); do mv "$B/ren/r$i" "$B/ren/s$i"; done
rm "$B"/del/d*
mv "$B/top" "$B/top2"

say "writeback all: the renamed files reached through their handles"
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "$(zr_stat blocks_dirty) blocks still dirty after writeback all"
hw=$(zr_stat handle_opens)
rd=$(zr_stat removed_dropped)
say "handle_opens $hw, removed_dropped $rd"
# every renamed file but the few the fd cache may still hold
[ "$hw" -ge $((N - 16)) ] || fail "handle_opens is $hw, expected at least $((N - 16))"
[ "$rd" -ge $(((N - 16) * 9000)) ] || fail "removed_dropped is $rd, expected at least $(((N - 16) * 9000))"
for i in $(seq $N); do
	cmp "$ZR_TMP/src$i" "$B/ren/s$i" || fail "renamed file s$i is not the data written"
done
cmp "$ZR_TMP/src1" "$B/top2/sub/deep" || fail "the file in the renamed directory is not the data written"
[ -z "$(ls -A "$B/del")" ] || fail "a removed file came back: $(ls "$B/del" | head -3)"
grep -q "renamed behind its back" "$ZR_LOG" || fail "the log does not say a file was reached by handle"
grep -q "removed from the backing directory behind" "$ZR_LOG" ||
	fail "the log does not say dirty data of a removed file was dropped"

say "fsync(2) of an open file renamed behind the daemon's back"
# (what it wrote reaches the daemon before the rename: sync(2) makes the
# kernel send what its writeback cache holds, which stays dirty in the tier)
hw0=$(zr_stat handle_opens)
python3 - "$M" "$B" <<'EOF' || fail "fsync of a file renamed behind the daemon's back"
import os, sys
m, b = sys.argv[1], sys.argv[2]
a, z = os.urandom(20000), os.urandom(30000)
fd = os.open(m + "/ren/open", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, a)
os.fsync(fd)
os.write(fd, z)
os.sync()
os.rename(b + "/ren/open", b + "/ren/open.moved")
for i in range(40):		# push the file's fd out of the cache
    with open("%s/fill1/g%d" % (m, i), "w") as f:
        f.write("x")
os.fsync(fd)			# raises on failure
with open(b + "/ren/open.moved", "rb") as f:
    got = f.read()
os.close(fd)
if got != a + z:
    sys.exit("after fsync the renamed backing file holds %d bytes, not the %d written"
             % (len(got), len(a) + len(z)))
EOF

hw1=$(zr_stat handle_opens)
[ "$hw1" -gt "$hw0" ] || fail "handle_opens stayed at $hw0: the fsync did not go through the handle"

say "files removed behind the daemon's back, then new ones made through the mount"
# ext4 gives the new files the old ones' inode numbers at once: the daemon
# must not take them for the old files (whose handles are stale: their
# data would be dropped as a removed file's)
mkdir "$M/reuse"
for i in $(seq 20); do cp "$ZR_TMP/src$i" "$M/reuse/old$i"; done
zr_ctl writeback all
old_inos=$(stat -c %i "$B"/reuse/old* | sort)
rm "$B"/reuse/old*
for i in $(seq 20); do cp "$ZR_TMP/src$((i + 20))" "$M/reuse/new$i"; done
reused=$(comm -12 <(echo "$old_inos") <(stat -c %i "$B"/reuse/new* | sort) | wc -l)
say "$reused of 20 new files have an old file's inode number"
rd0=$(zr_stat removed_dropped)
zr_ctl writeback all
for i in $(seq 20); do
	cmp "$ZR_TMP/src$((i + 20))" "$B/reuse/new$i" ||
		fail "reuse/new$i (made through the mount after old files were removed behind its back) is not the data written"
done
[ "$(zr_stat removed_dropped)" = "$rd0" ] ||
	fail "removed_dropped grew from $rd0 to $(zr_stat removed_dropped): new files were taken for removed ones"

say "the final writeback at unmount: $N renamed, $N removed, 4 replaced by a symlink or a directory, 1 made again, then umount ends"
mkdir "$M/late" "$M/repl"
for i in $(seq $N); do
	cp "$ZR_TMP/src$i" "$M/late/a$i"
	cp "$ZR_TMP/src$i" "$M/late/b$i"
done
for i in 1 2 3 4 5; do cp "$ZR_TMP/src$i" "$M/repl/s$i"; done
fill "$M/fill2" 64
[ "$(zr_stat blocks_dirty)" -ge $((N * 2 * 2)) ] || fail "too few dirty blocks before the unmount"
for i in $(seq $N); do mv "$B/late/a$i" "$B/late/m$i"; done
rm "$B"/late/b*
# the name now opens as something else (ELOOP, EISDIR): s1 and s2 were
# removed, s3 and s4 moved away first
rm "$B/repl/s1" "$B/repl/s2"
mv "$B/repl/s3" "$B/repl/moved3"
mv "$B/repl/s4" "$B/repl/moved4"
ln -s /nonexistent "$B/repl/s1"
ln -s /nonexistent "$B/repl/s3"
mkdir "$B/repl/s2" "$B/repl/s4"
# s5 removed and made again: ext4 gives the new file the old one's inode
# number at once, and only the handle's generation tells them apart
ino5=$(stat -c %i "$B/repl/s5")
rm "$B/repl/s5"
echo "a new file, made behind the daemon's back" >"$B/repl/s5"
say "repl/s5 made again with inode number $(stat -c %i "$B/repl/s5") (it was $ino5)"
log=$ZR_LOG
# before: every attempt failed with ENOENT, and the daemon never exited
zr_umount
for i in $(seq $N); do
	cmp "$ZR_TMP/src$i" "$B/late/m$i" || fail "late/m$i is not the data written after the unmount"
done
[ "$(ls "$B/late" | wc -l)" = "$N" ] || fail "late/ holds $(ls "$B/late" | wc -l) files, expected $N"
cmp "$ZR_TMP/src3" "$B/repl/moved3" || fail "repl/moved3 (its name then a symlink) is not the data written"
cmp "$ZR_TMP/src4" "$B/repl/moved4" || fail "repl/moved4 (its name then a directory) is not the data written"
[ -L "$B/repl/s1" ] && [ -L "$B/repl/s3" ] && [ -d "$B/repl/s2" ] && [ -d "$B/repl/s4" ] ||
	fail "what replaced the names in repl/ was changed: $(ls -l "$B/repl")"
[ "$(cat "$B/repl/s5")" = "a new file, made behind the daemon's back" ] ||
	fail "repl/s5, made again behind the daemon's back, was overwritten with the old file's data"
! grep -q "final writeback failed" "$log" || fail "the final writeback failed: $(grep "final writeback failed" "$log" | head -1)"
# one line a file for the first few files of each kind, then one that says
# the rest are only counted (of both mounts' phases: the daemon counts for
# its whole life)
n=$(grep -c "renamed behind its back" "$log" || true)
[ "$n" -le 8 ] || fail "$n files reached by handle were logged, expected at most 8"
grep -q "more files renamed behind zramfs's back: counted in handle_opens" "$log" ||
	fail "the log does not say that further renamed files are only counted"
grep -q "more files removed behind zramfs's back: counted in removed_dropped" "$log" ||
	fail "the log does not say that further removed files are only counted"

say "ramfs, whose answers are not trusted: no handles, and nothing dropped"
RB=$ZR_TMP/ramback
mkdir -p "$RB"
mount -t ramfs ramfs "$RB" || fail "cannot mount a ramfs on $RB"
zr_mount "max_fds=16,block_size=4k,dirty_expire=1h,seq_cutoff=0" "$RB" "$M"
grep -q "not opened by handle on this backing filesystem" "$ZR_LOG" ||
	fail "the daemon does not say that it opens no file by handle on ramfs"
mkdir "$M/r" "$M/h"
for i in $(seq $N); do
	cp "$ZR_TMP/src$i" "$M/r/x$i"
	cp "$ZR_TMP/src$i" "$M/h/a$i"
	ln "$M/h/a$i" "$M/h/b$i"
done
fill "$M/fill" 64
say "hard links: one of the two names renamed behind the daemon's back, the other reaches the file"
for i in $(seq $N); do
	if [ $((i % 2)) = 0 ]; then mv "$RB/h/a$i" "$RB/h/c$i"; else mv "$RB/h/b$i" "$RB/h/c$i"; fi
done
for i in $(seq $N); do mv "$RB/r/x$i" "$RB/r/y$i"; done
# the names reach nothing and there is no handle: the blocks stay dirty
if echo "writeback all" >"$M/.zramfs/control"; then
	fail "writeback all succeeded although no name reaches the renamed files"
fi
[ "$(zr_stat blocks_dirty)" -ge $(((N - 16) * 3)) ] ||
	fail "only $(zr_stat blocks_dirty) blocks still dirty after the failed writeback"
# said in the log for the first 8 files (then counted only), once for a
# file however often it is retried
said=$(grep -c "cannot open the backing file of inode .* to write its data back (kept in RAM, retried): none of its names reaches it" "$ZR_LOG")
[ "$said" = 8 ] || fail "the log says $said times that a renamed file's backing file cannot be opened, want 8 (then no more)"
grep -q "more files whose backing file cannot be opened to write their data back: counted in writeback_errors" "$ZR_LOG" ||
	fail "the log does not say that it stops logging the files that cannot be opened"
echo "writeback all" >"$M/.zramfs/control" 2>/dev/null &&
	fail "writeback all succeeded the second time although no name reaches the renamed files"
again=$(grep -c "cannot open the backing file of inode" "$ZR_LOG")
[ "$again" = "$said" ] || fail "a second writeback all logged files again ($said, then $again lines)"
say "the failed opens logged for the first $said files, then counted"
for i in $(seq $N); do
	cmp "$ZR_TMP/src$i" "$RB/h/c$i" ||
		fail "ramfs h/c$i is not the data written: the hard link's other name was not tried"
done
[ "$(zr_stat removed_dropped)" = 0 ] || fail "removed_dropped is $(zr_stat removed_dropped) on ramfs"
[ "$(zr_stat handle_opens)" = 0 ] || fail "handle_opens is $(zr_stat handle_opens) on ramfs"
say "the names put back: everything is written back"
for i in $(seq $N); do mv "$RB/r/y$i" "$RB/r/x$i"; done
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "$(zr_stat blocks_dirty) blocks still dirty with the names back"
zr_umount
for i in $(seq $N); do
	cmp "$ZR_TMP/src$i" "$RB/r/x$i" || fail "ramfs r/x$i is not the data written"
	cmp "$ZR_TMP/src$i" "$RB/h/c$i" || fail "ramfs h/c$i (a hard link's renamed name) is not the data written"
done

say "a file removed behind our back while its fd is cached (default max_fds)"
CB=$ZR_TMP/cached
mkdir -p "$CB"
zr_mount "block_size=4k,dirty_expire=1h,seq_cutoff=0" "$CB" "$M"
head -c $((1 << 20)) /dev/urandom >"$ZR_MNT/gone"
cat "$ZR_MNT/gone" >/dev/null
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "the file's blocks are not dirty: the case is not tested"
rd0=$(zr_stat removed_dropped) bw0=$(zr_stat bytes_written_backing)
rm "$CB/gone"
zr_ctl writeback all
rd1=$(zr_stat removed_dropped) bw1=$(zr_stat bytes_written_backing)
say "removed_dropped $rd0 -> $rd1, bytes_written_backing $bw0 -> $bw1"
[ $((rd1 - rd0)) -ge $((1 << 20)) ] ||
	fail "removed_dropped grew by $((rd1 - rd0)): the data went into the removed file"
[ $((bw1 - bw0)) -lt $((1 << 20)) ] ||
	fail "bytes_written_backing grew by $((bw1 - bw0)): the data was written into the removed file"
zr_umount

say "a symlink put where a FIFO was: a chmod of the FIFO must not reach the symlink's target"
SB=$ZR_TMP/symback
mkdir -p "$SB"
zr_mount "" "$SB" "$M"
mkfifo "$ZR_MNT/fifo"
echo secret >"$ZR_TMP/target"
chmod 600 "$ZR_TMP/target"
# the FIFO held by an O_PATH fd (a path would be looked up again and
# reach the symlink in the kernel), changed through /proc/self/fd
out=$(python3 - "$ZR_MNT/fifo" "$SB" "$ZR_TMP/target" <<'PY'
import os, sys
fifo, back, target = sys.argv[1:4]
fd = os.open(fifo, os.O_PATH)
os.rename(back + "/fifo", back + "/fifo.old")
os.symlink(target, back + "/fifo")
try:
    os.chmod("/proc/self/fd/%d" % fd, 0o666)
    print("chmod ok")
except OSError as e:
    print("chmod error:", e.strerror)
PY
)
say "$out"
[ "$(stat -c %a "$ZR_TMP/target")" = 600 ] ||
	fail "a chmod of the FIFO followed the symlink put in its place: the target is mode $(stat -c %a "$ZR_TMP/target")"
[ "$out" != "chmod ok" ] || fail "the chmod succeeded on a name that holds a symlink now"

say "another file renamed where a FIFO was: chown, utimes and setxattr of the FIFO must not reach it"
mkfifo "$ZR_MNT/fifo2"
echo other >"$ZR_TMP/other"
touch -d @1000000000 "$ZR_TMP/other"
chown 0:0 "$ZR_TMP/other"
out=$(python3 - "$ZR_MNT/fifo2" "$SB" "$ZR_TMP/other" <<'PY'
import os, sys
fifo, back, other = sys.argv[1:4]
fd = os.open(fifo, os.O_PATH)
os.rename(back + "/fifo2", back + "/fifo2.old")
os.rename(other, back + "/fifo2")
p = "/proc/self/fd/%d" % fd
for what, call in (("chown", lambda: os.chown(p, 65534, 65534)),
                   ("utime", lambda: os.utime(p, (2000000000, 2000000000))),
                   ("setxattr", lambda: os.setxattr(p, "trusted.zr", b"x"))):
    try:
        call()
        print(what, "ok")
    except OSError as e:
        print(what, "error:", e.strerror)
PY
)
say "$(echo $out)"
st=$(stat -c "%u:%g %Y" "$SB/fifo2")
[ "$st" = "0:0 1000000000" ] ||
	fail "a chown or utimes of the FIFO reached the file renamed in its place: it is now $st"
! getfattr -n trusted.zr "$SB/fifo2" >/dev/null 2>&1 ||
	fail "a setxattr of the FIFO reached the file renamed in its place"
! echo "$out" | grep -q " ok$" || fail "a change succeeded on a name that holds another file now: $out"
zr_umount

say "another user's set-user-ID file renamed over a symlink being made: not given to root"
# (zr_fault.so holds the daemon 1.5 s between its symlinkat and the giving
# of the new node to the caller, root here: the daemon knew the node by
# its name only, made whatever file it held root's, and put its set-id
# bits back)
FAULT=$(zr_helper zr_fault.so)
PB=$ZR_TMP/plantback
mkdir -p "$PB"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=planted ZR_FAULT_MAKE_DELAY_MS=1500 \
	zr_mount_fault "" "$PB" "$M"
cp /bin/true "$ZR_TMP/suid"
chown 65534:65534 "$ZR_TMP/suid"
chmod 4755 "$ZR_TMP/suid"
touch "$ZR_TMP/armed"
ln -s target "$ZR_MNT/planted" 2>"$ZR_TMP/ln.err" &
lnpid=$!
sleep 0.5
[ ! -e "$ZR_TMP/armed" ] || { wait "$lnpid"; fail "the daemon's symlinkat was not held"; }
mv "$ZR_TMP/suid" "$PB/planted" || fail "cannot rename the file over the symlink"
lnrc=0
wait "$lnpid" || lnrc=$?
say "ln -s: exit $lnrc $(cat "$ZR_TMP/ln.err")"
st=$(stat -c "%u:%g %a" "$PB/planted")
[ "$st" = "65534:65534 4755" ] ||
	fail "the file renamed over the new symlink is now $st: made root's (mknod put its set-id bits back too)"
zr_umount
