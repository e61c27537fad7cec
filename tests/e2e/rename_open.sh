#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_open: a file is renamed, then its directory is renamed, while a
# process keeps it open and writes.  The daemon re-opens backing files by
# parent and name, so it must track renames: the data written after each
# rename must land in the file under its new name (and nowhere else), also
# when written back while the file is still open.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/dir1" "$B/other" "$M"
for i in 1 2 3 4; do head -c 700000 /dev/urandom >"$ZR_TMP/chunk$i"; done
cat "$ZR_TMP"/chunk[1234] >"$ZR_TMP/expect"
echo "the victim" >"$B/other/victim"

zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

exec 3>"$M/dir1/file"
cat "$ZR_TMP/chunk1" >&3
say "rename the open file"
mv "$M/dir1/file" "$M/dir1/file2"
cat "$ZR_TMP/chunk2" >&3
say "rename its directory"
mv "$M/dir1" "$M/dir2"
cat "$ZR_TMP/chunk3" >&3
zr_ctl writeback all
say "rename it over an existing file in another directory"
mv "$M/dir2/file2" "$M/other/victim"
cat "$ZR_TMP/chunk4" >&3
exec 3>&-

[ ! -e "$M/dir1" ] || fail "dir1 still exists"
[ ! -e "$M/dir2/file" ] && [ ! -e "$M/dir2/file2" ] || fail "an old name still exists"
cmp "$ZR_TMP/expect" "$M/other/victim" || fail "content under the new name differs"
zr_ctl writeback all
if zr_real; then
	cmp "$ZR_TMP/expect" "$B/other/victim" ||
		fail "backing file differs after 'writeback all' while mounted"
fi
zr_umount

say "checking the backing directory"
cmp "$ZR_TMP/expect" "$B/other/victim" || fail "backing other/victim differs"
leftovers=$(cd "$B" && find . -type f ! -path ./other/victim)
[ -z "$leftovers" ] || fail "stray files in the backing directory: $leftovers"

zr_mount "" "$B" "$M"
cmp "$ZR_TMP/expect" "$ZR_MNT/other/victim" || fail "content differs after remount"
zr_umount
