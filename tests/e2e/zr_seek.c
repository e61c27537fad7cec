// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_seek: prints the data segments of a file found with SEEK_DATA/SEEK_HOLE.
 *
 * Usage: zr_seek FILE
 * Prints one line "data START END" per data segment (END exclusive) and a
 * last line "size SIZE".  Exit 0 on success, 1 if lseek fails (the error is
 * printed), 2 on a usage error.  The end-to-end tests compare these
 * segments with where they wrote data.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct stat st;
	off_t pos = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: zr_seek FILE\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "zr_seek: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while (pos < st.st_size) {
		off_t data = lseek(fd, pos, SEEK_DATA);
		off_t hole;

		if (data < 0) {
			if (errno == ENXIO)
				break;
			fprintf(stderr, "zr_seek: SEEK_DATA %lld: %s\n",
				(long long)pos, strerror(errno));
			return 1;
		}
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0) {
			fprintf(stderr, "zr_seek: SEEK_HOLE %lld: %s\n",
				(long long)data, strerror(errno));
			return 1;
		}
		if (hole <= data) {
			fprintf(stderr, "zr_seek: SEEK_HOLE %lld returned %lld\n",
				(long long)data, (long long)hole);
			return 1;
		}
		printf("data %lld %lld\n", (long long)data, (long long)hole);
		pos = hole;
	}
	printf("size %lld\n", (long long)st.st_size);
	close(fd);
	return 0;
}
