// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_mmap: writes a file through a shared writable mapping and checks that
 * read() sees it.
 *
 * Usage: zr_mmap write FILE SIZE SEED    create/resize FILE to SIZE, fill it
 *        zr_mmap patch FILE OFFSET LEN SEED   overwrite a range of FILE
 * The bytes are a function of (SEED, absolute offset), so a reference file
 * made the same way on a plain directory must compare equal.  After the
 * stores, msync(MS_SYNC); then a second descriptor read()s the range back
 * and compares it with the mapping.  Exit 0 on success, 1 on a failure or
 * mismatch (printed), 2 on a usage error.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* pattern_byte: the byte at absolute offset @off for @seed (splitmix64 of
 * the 8-byte word index). */
static unsigned char pattern_byte(uint64_t seed, uint64_t off)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (off >> 3) + 1;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (unsigned char)(z >> ((off & 7) * 8));
}

static int die(const char *what, const char *file)
{
	fprintf(stderr, "zr_mmap: %s %s: %s\n", what, file, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t off, len, seed, i, size;
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *map, *buf;
	uint64_t map_off, map_len;
	const char *file;
	int fd, fd2;

	if (argc == 5 && strcmp(argv[1], "write") == 0) {
		off = 0;
		len = strtoull(argv[3], NULL, 0);
		seed = strtoull(argv[4], NULL, 0);
	} else if (argc == 6 && strcmp(argv[1], "patch") == 0) {
		off = strtoull(argv[3], NULL, 0);
		len = strtoull(argv[4], NULL, 0);
		seed = strtoull(argv[5], NULL, 0);
	} else {
		fprintf(stderr, "usage: zr_mmap write FILE SIZE SEED | patch FILE OFFSET LEN SEED\n");
		return 2;
	}
	if (len == 0)
		return 2;
	file = argv[2];
	fd = open(file, O_RDWR | (argv[1][0] == 'w' ? O_CREAT : 0), 0644);
	if (fd < 0)
		return die("open", file);
	if (argv[1][0] == 'w' && ftruncate(fd, (off_t)len) < 0)
		return die("ftruncate", file);
	size = (uint64_t)lseek(fd, 0, SEEK_END);
	if (off + len > size) {
		fprintf(stderr, "zr_mmap: range past the end of %s\n", file);
		return 1;
	}
	map_off = off & ~(uint64_t)(page - 1);
	map_len = len + (off - map_off);
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_off);
	if (map == MAP_FAILED)
		return die("mmap", file);
	for (i = 0; i < len; i++)
		map[off - map_off + i] = pattern_byte(seed, off + i);
	if (msync(map, map_len, MS_SYNC) < 0)
		return die("msync", file);

	/* A second, independent descriptor must read what the mapping holds. */
	fd2 = open(file, O_RDONLY);
	if (fd2 < 0)
		return die("open (second fd)", file);
	buf = malloc(len);
	if (!buf)
		return die("malloc", file);
	if (pread(fd2, buf, len, (off_t)off) != (ssize_t)len)
		return die("pread", file);
	for (i = 0; i < len; i++) {
		if (buf[i] != pattern_byte(seed, off + i)) {
			fprintf(stderr, "zr_mmap: %s: read() at %llu differs from the mapping\n",
				file, (unsigned long long)(off + i));
			return 1;
		}
	}
	free(buf);
	close(fd2);
	if (munmap(map, map_len) < 0)
		return die("munmap", file);
	if (close(fd) < 0)
		return die("close", file);
	return 0;
}
