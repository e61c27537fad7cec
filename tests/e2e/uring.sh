#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# uring: FUSE over io_uring (uring=on).  With the fuse module's enable_uring
# parameter off, uring=on says so and serves through /dev/fuse.  With it on,
# requests come through the rings: a source tree copied in, two writers and
# a reader at once, renames, links and removals all read back identical,
# through the mount and, after the unmount, in the backing directory.  A
# file made with O_TMPFILE (FUSE_TMPFILE on a ring), written and linked,
# reads back after a remount, and one closed without a name leaves no
# orphan name and no file in the backing directory.  Then some of the
# suite's own tests (tmpfile.sh too) run again with uring=on (ZR_E2E_OPTS),
# each checking at its unmounts that its requests came through the rings.
# Ring threads give their buffers back when idle (buffer_trims), and a
# queue whose threads all wait in lseek(SEEK_DATA) for the WRITEs of dirty
# pages grows instead of deadlocking.  The ring threads go to SCHED_IDLE for a
# lone process and back to SCHED_OTHER when CPU hogs starve them.  Ring
# threads serving a cold stream read may run on any CPU, and are pinned to
# their queue's CPU again by small requests.
# The parameter is put back as it was in every exit path.
ZR_TIMEOUT=${ZR_TIMEOUT:-900}
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "io_uring is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_root "sets the fuse module's enable_uring parameter"
P=/sys/module/fuse/parameters/enable_uring
[ -w "$P" ] || zr_skip "this kernel has no FUSE over io_uring ($P is missing: Linux 6.14 or later)"
old=$(cat "$P")
ZR_ATEXIT+=("echo $old >$P")

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
SRC=/usr/include/linux
[ -d "$SRC" ] || SRC=/usr/include

say "enable_uring=N: uring=on serves through /dev/fuse, and says why"
echo N >"$P"
zr_mount "uring=on" "$B" "$M"
echo hello >"$ZR_MNT/hello"
[ "$(cat "$ZR_MNT/hello")" = hello ] || fail "read back '$(cat "$ZR_MNT/hello")'"
[ "$(zr_stat uring_active)" = 0 ] || fail "uring_active is $(zr_stat uring_active) with enable_uring=N"
grep -q "does not offer FUSE over io_uring" "$ZR_LOG" ||
	fail "no warning that the kernel does not offer io_uring in the daemon's log"
zr_umount

echo Y >"$P"
S=/proc/sys/kernel/io_uring_disabled
if [ -w "$S" ]; then
	say "io_uring offered but unusable (io_uring_disabled=2): /dev/fuse, no hang"
	# once the kernel takes an INIT reply that asks for io_uring, it holds
	# every request back until the rings take them: a daemon that asked
	# and then could not make its rings hung the mount
	sold=$(cat "$S")
	ZR_ATEXIT+=("echo $sold >$S")
	echo 2 >"$S"
	zr_mount "uring=on" "$B" "$M"
	timeout 10 cat "$ZR_MNT/hello" >/dev/null || fail "the mount hangs when the rings cannot be made"
	echo "$sold" >"$S"
	[ "$(zr_stat uring_active)" = 0 ] || fail "uring_active is $(zr_stat uring_active) without io_uring"
	grep -q "cannot set up the rings" "$ZR_LOG" || fail "no warning that the rings cannot be set up"
	zr_umount
fi

say "enable_uring=Y: requests come through the rings"
zr_mount "uring=on" "$B" "$M"
ls "$ZR_MNT" >/dev/null
[ "$(cat "$ZR_MNT/hello")" = hello ] || fail "read back '$(cat "$ZR_MNT/hello")' through the rings"
[ "$(zr_stat uring_active)" = 1 ] || fail "uring_active is $(zr_stat uring_active) with enable_uring=Y"

say "a source tree copied in and compared"
cp -a "$SRC" "$ZR_MNT/tree"
diff -r "$SRC" "$ZR_MNT/tree" >/dev/null || fail "the copy of $SRC differs"

say "two writers and a reader at once"
tr0=$(zr_stat buffer_trims)
head -c $((24 << 20)) /dev/urandom >"$ZR_TMP/r1"
head -c $((24 << 20)) /dev/urandom >"$ZR_TMP/r2"
dd if="$ZR_TMP/r1" of="$ZR_MNT/w1" bs=64k status=none conv=fsync &
p1=$!
dd if="$ZR_TMP/r2" of="$ZR_MNT/w2" bs=4k status=none &
p2=$!
tar -C "$ZR_MNT/tree" -cf - . | md5sum >"$ZR_TMP/tar.sum" &
p3=$!
wait "$p1" || fail "the 64k writer failed"
wait "$p2" || fail "the 4k writer failed"
wait "$p3" || fail "the reader failed"
tar -C "$SRC" -cf - . | md5sum | cmp -s - "$ZR_TMP/tar.sum" ||
	fail "the tree read during the writes differs from $SRC"
zr_drop_kcache
cmp "$ZR_TMP/r1" "$ZR_MNT/w1" || fail "w1 differs"
cmp "$ZR_TMP/r2" "$ZR_MNT/w2" || fail "w2 differs"
say "idle ring threads give their buffers back"
sleep 3.5
tr1=$(zr_stat buffer_trims)
[ "$tr1" -ge $((tr0 + 2)) ] || fail "buffer_trims went from $tr0 to $tr1 only, 3.5 s after 1 MiB requests"

say "renames, links and removals"
mkdir "$ZR_MNT/d"
for i in $(seq 200); do echo "$i" >"$ZR_MNT/d/f$i"; done
for i in $(seq 1 2 200); do mv "$ZR_MNT/d/f$i" "$ZR_MNT/d/g$i"; done
for i in $(seq 2 4 200); do ln "$ZR_MNT/d/f$i" "$ZR_MNT/d/h$i"; done
for i in $(seq 4 4 200); do rm "$ZR_MNT/d/f$i"; done
[ "$(ls "$ZR_MNT/d" | wc -l)" = 200 ] || fail "$(ls "$ZR_MNT/d" | wc -l) names in d, want 200"
[ "$(cat "$ZR_MNT/d/g101" "$ZR_MNT/d/h102")" = "$(printf '101\n102')" ] ||
	fail "g101/h102 read back wrong"
say "lseek(SEEK_DATA) on files with dirty pages, four callers on one CPU"
# The daemon makes the kernel write a file's dirty pages back (WRITEs, to
# the queue of the CPU it runs on) before it answers; with every thread of
# that queue in such an lseek, the queue must grow or the WRITEs wait forever.
cat >"$ZR_TMP/seek.py" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
blk = 1 << 20
for i in range(40):
    os.pwrite(fd, bytes([i % 251 + 1]) * 65536, 2 * i * blk)
    h = os.lseek(fd, 2 * i * blk, os.SEEK_DATA)
    assert h == 2 * i * blk, "SEEK_DATA at block %d gave %d" % (2 * i, h)
    g = os.lseek(fd, 2 * i * blk, os.SEEK_HOLE)
    assert g == 2 * i * blk + 65536, "SEEK_HOLE in block %d gave %d" % (2 * i, g)
for i in range(40):
    assert os.pread(fd, 65536, 2 * i * blk) == bytes([i % 251 + 1]) * 65536, "block %d" % i
os.close(fd)
EOF
t0=$(zr_stat uring_threads)
pids=()
for k in 1 2 3 4; do
	timeout 60 taskset -c 0 python3 "$ZR_TMP/seek.py" "$ZR_MNT/seek$k" &
	pids+=($!)
done
for _ in $(seq 600); do
	kill -0 "${pids[@]}" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "${pids[@]}" 2>/dev/null; then
	# deadlocked: abort the connection, or the callers and a daemon
	# thread stay in D state (no signal frees them)
	conn=/sys/fs/fuse/connections/$(mountpoint -d "$ZR_MNT" | cut -d: -f2)
	if [ ! -d "$conn" ] && mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null; then
		ZR_ATEXIT+=("umount /sys/fs/fuse/connections")
	fi
	echo 1 >"$conn/abort" 2>/dev/null || true
	fail "the lseek callers still wait after 60 s (a queue that did not grow deadlocks)"
fi
for p in "${pids[@]}"; do
	wait "$p" || fail "an lseek caller failed"
done
say "ring threads: $t0 before, $(zr_stat uring_threads) after"

say "ring threads at SCHED_IDLE for a lone process, back at SCHED_OTHER when CPUs are taken"
# A lone caller would follow its requests from CPU to CPU (the ring thread
# that answers still holds the caller's CPU when it wakes it); at SCHED_IDLE
# it does not, but a CPU hog leaves an idle thread nothing: the daemon
# switches between the two (uring.c, sched_main()).
cat >"$ZR_TMP/loop.py" <<'EOF'
import os, sys, time
end = time.time() + float(sys.argv[2])
while time.time() < end:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    os.read(fd, 4096)
    os.close(fd)
EOF
# (every CPU must have a fifth of its time idle, or in iowait, for
# SCHED_IDLE: measured first, over 2 s; a machine busy with other work is
# no place for this part)
idle_min() { # the lowest idle share of a CPU between two /proc/stat snapshots
	awk 'FNR == NR { if ($1 ~ /^cpu[0-9]/) { t = 0; for (i = 2; i <= 9; i++) t += $i; i0[$1] = $5 + $6; t0[$1] = t }; next }
	     $1 ~ /^cpu[0-9]/ { t = 0; for (i = 2; i <= 9; i++) t += $i; p = t > t0[$1] ? ($5 + $6 - i0[$1]) * 100 / (t - t0[$1]) : 0
	                        if (m == "" || p < m) m = p }
	     END { printf "%d\n", m }' "$1" "$2"
}
cat /proc/stat >"$ZR_TMP/stat0"
sleep 2
cat /proc/stat >"$ZR_TMP/stat1"
idle0=$(idle_min "$ZR_TMP/stat0" "$ZR_TMP/stat1")
if [ "$idle0" -lt 60 ]; then
	say "skipped: a CPU was only $idle0% idle over 2 s before the test (other work runs here)"
else
	sw0=$(zr_stat uring_sched_switches)
	timeout 120 python3 "$ZR_TMP/loop.py" "$ZR_MNT/hello" 100 &
	lp=$!
	ZR_ATEXIT+=("kill $lp 2>/dev/null")
	idle=0
	for _ in $(seq 100); do
		idle=$(zr_stat uring_sched_idle)
		[ "$idle" = 1 ] && break
		sleep 0.1
	done
	[ "$idle" = 1 ] || fail "a lone loop ran 10 s and the ring threads never went to SCHED_IDLE"
	hogs=()
	for c in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$c" sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	ZR_ATEXIT+=("kill ${hogs[*]} 2>/dev/null")
	for _ in $(seq 100); do
		idle=$(zr_stat uring_sched_idle)
		[ "$idle" = 0 ] && break
		sleep 0.1
	done
	kill -0 "$lp" 2>/dev/null || fail "the loop ended before the CPU hogs were seen (a switch for quiet, not starvation)"
	kill "${hogs[@]}" "$lp" 2>/dev/null
	wait "${hogs[@]}" "$lp" 2>/dev/null || true	# (killed: 143)
	[ "$idle" = 0 ] || fail "with a CPU hog on every CPU the ring threads stayed at SCHED_IDLE"
	sw1=$(zr_stat uring_sched_switches)
	say "scheduling class switches: $((sw1 - sw0))"
	[ "$sw1" -ge $((sw0 + 2)) ] || fail "uring_sched_switches went from $sw0 to $sw1, want 2 more"
fi

say "a cold stream read unpins the ring threads that serve it; small requests, or a pause, pin them again"
# Read-ahead comes from a process that runs on while it is served; a ring
# thread pinned to that process's CPU shares it while the other CPUs idle,
# so a thread serving bulk READs and WRITEs in a row may run anywhere
# (uring.c, place()). dd reads 16 MiB at a time into a pipe whose reader
# first looks at the ring threads' CPUs; the small reads after it run on
# the same CPU, in that queue, and pin the thread serving them again; a
# second without requests pins every thread again.
wide_threads() { # ring threads allowed on other CPUs than their queue's
	local t c n=0
	for t in /proc/"$ZR_PID"/task/*; do
		c=$(cat "$t/comm" 2>/dev/null)
		case $c in zramfs-ring*) ;; *) continue ;; esac
		[ "$(awk '/^Cpus_allowed_list:/ { print $2 }' "$t/status" 2>/dev/null)" = "${c#zramfs-ring}" ] ||
			n=$((n + 1))
	done
	echo "$n"
}
if [ "$(nproc)" -lt 2 ]; then
	say "skipped: one CPU, nowhere else to run"
elif ! zr_can_drop_kcache; then
	say "skipped: cannot drop the page cache here (/proc/sys/vm/drop_caches), so no cold read"
else
	head -c $((48 << 20)) /dev/urandom >"$ZR_TMP/bulk"
	cp "$ZR_TMP/bulk" "$ZR_MNT/bulk"
	sync -f "$ZR_MNT"
	zr_drop_kcache
	# the copy's WRITEs unpinned threads too: a second without requests
	# pins them all again
	sleep 1.5
	n=$(zr_stat uring_unpinned)
	[ "$n" = 0 ] || fail "$n ring threads still unpinned after 1.5 s without requests"
	u0=$(zr_stat uring_unpins)
	r0=$(zr_stat uring_repins)
	taskset -c 0 dd if="$ZR_MNT/bulk" bs=16M status=none |
		{ sleep 0.3; wide_threads >"$ZR_TMP/wide"; cat >"$ZR_TMP/bulk.back"; } ||
		fail "the cold read of bulk failed"
	for _ in $(seq 50); do
		taskset -c 0 cat "$ZR_MNT/hello" >/dev/null
	done
	cmp "$ZR_TMP/bulk" "$ZR_TMP/bulk.back" || fail "bulk read back different"
	u1=$(zr_stat uring_unpins)
	r1=$(zr_stat uring_repins)
	say "unpins $u0 -> $u1, ring threads off their CPU while dd waited: $(cat "$ZR_TMP/wide"), pinned again by small requests: $r0 -> $r1"
	[ "$u1" -gt "$u0" ] || fail "a cold read of 48 MiB unpinned no ring thread (uring_unpins stayed $u0)"
	[ "$(cat "$ZR_TMP/wide")" -ge 1 ] || fail "uring_unpins grew but no ring thread's affinity was wider than its CPU"
	[ "$r1" -gt "$r0" ] || fail "small requests on the stream's CPU pinned no ring thread again (uring_repins stayed $r0)"
fi
rm -f "$ZR_TMP/bulk" "$ZR_TMP/bulk.back" "$ZR_MNT/bulk"

n=$(zr_stat uring_requests)
[ "$n" -ge 5000 ] || fail "only $n requests came through the rings, want >= 5000"
say "$n requests through the rings"
zr_umount

say "after the unmount, the backing directory holds it all"
diff -r "$SRC" "$B/tree" >/dev/null || fail "the backing copy of $SRC differs"
cmp "$ZR_TMP/r1" "$B/w1" || fail "backing w1 differs"
cmp "$ZR_TMP/r2" "$B/w2" || fail "backing w2 differs"
[ "$(cat "$B/d/g101" "$B/d/h102")" = "$(printf '101\n102')" ] || fail "backing g101/h102 wrong"
rm -f "$ZR_TMP/r1" "$ZR_TMP/r2"

say "O_TMPFILE through the rings: linked and read back after a remount; a nameless one leaves nothing"
# FUSE_TMPFILE, which libfuse cannot dispatch, is turned into a CREATE as
# it comes off a ring too (zr_session_map_request() in uring.c), or
# O_TMPFILE fails with EOPNOTSUPP on the rings only.  One file is written
# with no name, linked (/proc/self/fd, AT_SYMLINK_FOLLOW) and read back
# after a remount; another is closed with no name: its orphan name goes,
# and its data reaches no file of the backing directory.
backing_files() { # the regular files of the backing directory, but .zramfs
	(cd "$B" && find . -path ./.zramfs -prune -o -type f -print | LC_ALL=C sort)
}
backing_files >"$ZR_TMP/files.before"
cat >"$ZR_TMP/tmpfile.py" <<'PY'
import ctypes, os, random, sys
mnt, orphans, want = sys.argv[1], sys.argv[2], sys.argv[3]
def show(what, fd):
    st = os.fstat(fd)
    print(f"{what}: nlink {st.st_nlink} size {st.st_size} mode {st.st_mode & 0o7777:o}")
os.umask(0o022)
data = random.Random(74).randbytes(3 << 20)
fd = os.open(mnt, os.O_TMPFILE | os.O_RDWR, 0o664)
os.pwrite(fd, data, 0)
show("linked, before the link", fd)
print("reads back", os.pread(fd, len(data), 0) == data)
# (os.link() calls link(2), which does not follow /proc/self/fd/N)
libc = ctypes.CDLL(None, use_errno=True)
if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, os.path.join(mnt, "tmpfile.linked").encode(),
               0x400) != 0:	# AT_FDCWD, AT_SYMLINK_FOLLOW
    sys.exit("linkat: " + os.strerror(ctypes.get_errno()))
os.pwrite(fd, b"after the link\n", len(data))
show("linked, after the link", fd)
os.close(fd)
fd = os.open(mnt, os.O_TMPFILE | os.O_WRONLY, 0o600)
os.pwrite(fd, random.Random(75).randbytes(1 << 20), 0)
show("nameless", fd)
print("orphan names while it is open:", len(os.listdir(orphans)))
os.close(fd)
with open(want, "wb") as f:
    f.write(data + b"after the link\n")
PY
cat >"$ZR_TMP/tmpfile.expect" <<'OUT'
linked, before the link: nlink 0 size 3145728 mode 644
reads back True
linked, after the link: nlink 1 size 3145743 mode 644
nameless: nlink 0 size 1048576 mode 600
orphan names while it is open: 1
OUT
zr_mount "uring=on" "$B" "$M"
ls "$ZR_MNT" >/dev/null
[ "$(zr_stat uring_active)" = 1 ] || fail "uring_active is $(zr_stat uring_active) after the remount"
q0=$(zr_stat uring_requests)
python3 "$ZR_TMP/tmpfile.py" "$ZR_MNT" "$B/.zramfs/unlinked" "$ZR_TMP/tmpfile.want" \
	>"$ZR_TMP/tmpfile.out" 2>&1 || fail "O_TMPFILE through the rings: $(tail -n 1 "$ZR_TMP/tmpfile.out")"
sed 's/^/     /' "$ZR_TMP/tmpfile.out"
diff -u "$ZR_TMP/tmpfile.expect" "$ZR_TMP/tmpfile.out" >&2 ||
	fail "O_TMPFILE through the rings: not what a local filesystem shows (diff above: - expected, + got)"
q1=$(zr_stat uring_requests)
[ "$q1" -gt "$q0" ] || fail "uring_requests stayed $q0 while the files were made"
# (the orphan's name goes at the last close and the FORGET, which the
# kernel may send after close(2) has returned)
for _ in $(seq 300); do
	[ "$(zr_stat orphans)" = 0 ] && [ -z "$(ls -A "$B/.zramfs/unlinked")" ] && break
	sleep 0.1
done
[ "$(zr_stat orphans)" = 0 ] || fail "orphans is $(zr_stat orphans) 30 s after the nameless file's close"
left=$(ls -A "$B/.zramfs/unlinked" | tr '\n' ' ')
[ -z "$left" ] || fail "the orphan directory still holds $left after the nameless file's close"
zr_umount
zr_mount "uring=on" "$B" "$M"
cmp "$ZR_TMP/tmpfile.want" "$ZR_MNT/tmpfile.linked" || fail "tmpfile.linked read back different after the remount"
[ "$(stat -c '%h %a' "$ZR_MNT/tmpfile.linked")" = "1 644" ] ||
	fail "tmpfile.linked after the remount: links and mode $(stat -c '%h %a' "$ZR_MNT/tmpfile.linked"), want 1 644"
[ "$(zr_stat uring_active)" = 1 ] && [ "$(zr_stat uring_requests)" -gt 0 ] ||
	fail "the read back did not come through the rings (uring_active $(zr_stat uring_active), uring_requests $(zr_stat uring_requests))"
zr_umount
cmp "$ZR_TMP/tmpfile.want" "$B/tmpfile.linked" || fail "the backing tmpfile.linked differs"
echo ./tmpfile.linked >>"$ZR_TMP/files.before"
LC_ALL=C sort -o "$ZR_TMP/files.before" "$ZR_TMP/files.before"
backing_files | diff -u "$ZR_TMP/files.before" - >&2 ||
	fail "the backing directory has other new files than tmpfile.linked (diff above)"
[ ! -e "$B/.zramfs" ] || fail "the backing directory still has .zramfs: $(ls -lAR "$B/.zramfs")"
rm -f "$ZR_TMP/tmpfile.want"

say "the suite's tests again, with uring=on"
here=$(cd "$(dirname "$0")" && pwd)
for t in posix fsx git compile_c fio_verify mmap_shared hardlinks truncate_sparse unlink_race signal_flush fsync_kill9 tmpfile; do
	[ -f "$here/$t.sh" ] || fail "$t.sh is missing"
	rc=0
	ZR_E2E_OPTS=uring=on ZR_E2E_URING=1 bash "$here/$t.sh" >"$ZR_TMP/$t.log" 2>&1 || rc=$?
	case $rc in
	0) say "$t: $(tail -n 1 "$ZR_TMP/$t.log")" ;;
	77) say "$t skipped: $(grep -m1 -i skip "$ZR_TMP/$t.log")" ;;
	*)
		tail -n 30 "$ZR_TMP/$t.log" >&2
		fail "$t failed with uring=on (exit $rc)"
		;;
	esac
	[ "$(cat "$P")" = Y ] || fail "$t changed $P"
done
