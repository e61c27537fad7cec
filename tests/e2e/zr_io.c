// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_io: copies a file and reports exactly which step failed with which
 * error, for the end-to-end tests of error reporting (ENOSPC, EROFS).
 *
 * Usage: zr_io copy SRC DST     write SRC to DST (created/truncated) in
 *                               1 MiB writes, then fsync, then close
 *        zr_io write SRC DST    the same without the fsync: only close()
 *                               can report what the writeback met
 *        zr_io fsync FILE       open FILE read-write, fsync, close
 * Prints "written N" (bytes for which write() succeeded, stopping at the
 * first failed write), then "fsync ok" or "fsync error: ..." (copy and
 * fsync), and "close ok"
 * or "close error: ..."; a failed write prints "write error: ..." first.
 * Exit 0 when every step succeeded, 1 otherwise, 2 on a usage error.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (1 << 20)

/* finish: fsync (when @sync) and close @fd, print the results; returns 0 or 1. */
static int finish(int fd, int sync)
{
	int bad = 0;

	if (sync) {
		if (fsync(fd) < 0) {
			printf("fsync error: %s\n", strerror(errno));
			bad = 1;
		} else {
			printf("fsync ok\n");
		}
	}
	if (close(fd) < 0) {
		printf("close error: %s\n", strerror(errno));
		bad = 1;
	} else {
		printf("close ok\n");
	}
	return bad;
}

int main(int argc, char **argv)
{
	long long written = 0;
	char *buf;
	int in, out, bad = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "fsync") == 0) {
		out = open(argv[2], O_RDWR);
		if (out < 0) {
			printf("open error: %s\n", strerror(errno));
			return 1;
		}
		return finish(out, 1);
	}
	if (argc != 4 || (strcmp(argv[1], "copy") != 0 && strcmp(argv[1], "write") != 0)) {
		fprintf(stderr, "usage: zr_io copy|write SRC DST | fsync FILE\n");
		return 2;
	}
	buf = malloc(CHUNK);
	in = open(argv[2], O_RDONLY);
	if (!buf || in < 0) {
		printf("open error: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		printf("open error: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		ssize_t n = read(in, buf, CHUNK), w;

		if (n < 0) {
			printf("read error: %s\n", strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		w = write(out, buf, (size_t)n);
		if (w > 0)
			written += w;
		if (w != n) {
			printf("write error: %s\n", w < 0 ? strerror(errno) : "short write");
			bad = 1;
			break;
		}
	}
	printf("written %lld\n", written);
	bad |= finish(out, strcmp(argv[1], "copy") == 0);
	close(in);
	free(buf);
	return bad;
}
