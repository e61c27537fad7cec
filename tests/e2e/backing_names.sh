#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# backing_names: a backing directory whose name has a comma, a backslash or
# a space mounts, and its name cannot add mount options: libfuse splits -o
# at commas, and the daemon passes the backing path as fsname= (before the
# fix "a,b" failed with "unknown option `-o b'", and a directory named
# "x,allow_other" would have mounted with allow_other).  A file written
# through each mount is in its backing directory after the unmount, and
# /proc/mounts names the backing directory as the source.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "checks the daemon's mount options"

n=0
for name in 'a,b' 'x,allow_other' 'c\d' 'sp ace' 'e,,f\,g'; do
	n=$((n + 1))
	B=$ZR_TMP/$name M=$ZR_TMP/mnt$n
	mkdir -p "$B" "$M"
	zr_mount "" "$B" "$M"
	line=$(awk -v m="$M" '$2 == m' /proc/mounts)
	say "'$name': $line"
	[ -n "$line" ] || fail "'$name': $M is not in /proc/mounts"
	case ",$(echo "$line" | awk '{ print $4 }')," in
	*,allow_other,*) fail "'$name': the backing name added allow_other: $line" ;;
	esac
	# /proc/mounts escapes space, tab, newline and backslash in octal
	src=$(printf '%s' "$B" | sed 's/\\/\\134/g; s/ /\\040/g')
	[ "$(echo "$line" | awk '{ print $1 }')" = "$src" ] ||
		fail "'$name': source is $(echo "$line" | awk '{ print $1 }'), want $src"
	echo "data of $name" >"$M/file"
	zr_umount
	[ "$(cat "$B/file")" = "data of $name" ] || fail "'$name': file not in the backing directory"
done
say "ok"
