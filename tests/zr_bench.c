// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_bench.c - engine benchmark: store/load speed, ratio and memory of the block store. */
/*
 * For every data kind x block size x codec, a working set of blocks is
 * stored into a fresh store (zr_file_write, ZR_WRITE_DIRTY, budget large
 * enough that nothing is ever demoted), stored again over itself ("rewrite":
 * the pool already holds its pages, as in a running daemon) and loaded back
 * (zr_file_read) into a buffer as large as the working set. Each cell runs
 * three timed passes (CLOCK_MONOTONIC) and reports the medians; a pass
 * starts from a new store, so the store column includes taking pool memory
 * from the system (first-touch page faults), as a first write of data does.
 * The loaded bytes are compared with the originals once, in the first pass,
 * outside the timed loops. lz4hc and zstd run on a quarter / half of the
 * working set so that the full run stays within a few minutes.
 *
 * For lz4 cells the same blocks are also compressed with LZ4_compress_fast
 * (acceleration 1, the store's default level) and decompressed with plain
 * LZ4_decompress_safe. The comparison with the store's loads runs in
 * alternating chunks of 64 blocks (ABBA order) in every pass, so that on a
 * shared machine both sides see the same interference; the "load/raw"
 * column is the median over passes of raw time / store load time. The end
 * of the output checks the targets of the issue (PASS / MISS per target).
 *
 * MB is 10^6 bytes; "us" columns are microseconds per block.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <lz4.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "datagen.h"
#include "zr_codec.h"
#include "zr_store.h"

/* Targets of the issue ("Benchmark"). */
#define TARGET_ZERO_US 0.3	/* store one zero 4 KiB block */
#define TARGET_RANDOM_US 3.0	/* store one random 4 KiB block */
#define TARGET_LOAD_FRAC 0.80	/* lz4 load speed / raw LZ4_decompress_safe */

#define MAX_PASSES 15

/* One codec column: the store's codec id and level. */
struct bench_codec {
	const char *label;	/* name printed, and accepted by --codec */
	enum zr_codec_id id;
	int level;
	unsigned ws_div;	/* slow codecs use working set / ws_div */
};

static const struct bench_codec codecs[] = {
	{ "lz4", ZR_CODEC_LZ4, 0, 1 },
	{ "lz4hc", ZR_CODEC_LZ4HC, 9, 4 },
	{ "zstd-1", ZR_CODEC_ZSTD, 1, 2 },
	{ "zstd-3", ZR_CODEC_ZSTD, 3, 2 },
	{ "none", ZR_CODEC_NONE, 0, 1 },
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

/* Data kinds: four from datagen, and a real file. */
struct bench_kind {
	const char *label;
	int gen;		/* enum zr_datagen_kind, or -1 for --file */
};

static const struct bench_kind kinds[] = {
	{ "zero", ZR_DATA_ZERO },
	{ "text", ZR_DATA_TEXT },
	{ "binary", ZR_DATA_BINARY },
	{ "random", ZR_DATA_RANDOM },
	{ "file", -1 },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))
#define KIND_FILE (NKINDS - 1)

static const uint32_t block_sizes[] = { 4096, 16384, 65536 };
#define NBS (sizeof(block_sizes) / sizeof(block_sizes[0]))

/* What one cell measured. */
struct cell {
	bool done;
	size_t nblocks;
	uint64_t bytes;		/* nblocks * block size */
	double store_s;		/* median seconds of one store pass (fresh store) */
	double rewrite_s;	/* median seconds of storing every block again */
	double load_s;		/* median seconds of one load pass */
	double raw_s;		/* median seconds of raw LZ4 decompression, < 0 if not run */
	double load_frac;	/* median over passes of raw time / load time, < 0 if not run */
	uint64_t orig, compr, mem;	/* stats after the first pass's stores */
};

struct bench_opts {
	size_t ws;		/* working set bytes per cell */
	unsigned passes;
	bool tsv;
	bool strict;		/* exit 1 when a target is missed */
	const char *file;
	bool kind_on[NKINDS];
	bool codec_on[NCODECS];
	bool bs_on[NBS];
};

static struct cell results[NKINDS][NBS][NCODECS];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "zr_bench: out of memory (%zu bytes)\n", n);
		exit(2);
	}
	return p;
}

static void die_rc(const char *what, int rc)
{
	fprintf(stderr, "zr_bench: %s: %s\n", what, strerror(-rc));
	exit(2);
}

/* ---- the machine ---- */

static void print_machine(const struct bench_opts *o)
{
	char line[512], model[256] = "unknown", load[128] = "?";
	const char *pfx = o->tsv ? "# " : "";
	FILE *fp = fopen("/proc/cpuinfo", "r");

	if (fp) {
		while (fgets(line, sizeof(line), fp)) {
			char *c = strchr(line, ':');

			if (strncmp(line, "model name", 10) == 0 && c) {
				snprintf(model, sizeof(model), "%s", c + 2);
				model[strcspn(model, "\n")] = '\0';
				break;
			}
		}
		fclose(fp);
	}
	fp = fopen("/proc/loadavg", "r");
	if (fp) {
		if (fgets(load, sizeof(load), fp))
			load[strcspn(load, "\n")] = '\0';
		fclose(fp);
	}
	printf("%szr_bench: zramfs engine benchmark\n", pfx);
	printf("%scpu: %s, nproc %ld, loadavg %s\n", pfx, model,
	       sysconf(_SC_NPROCESSORS_ONLN), load);
	printf("%slz4 %s; working set %zu MiB per cell, median of %u passes; "
	       "MB = 10^6 bytes, us = microseconds per block\n",
	       pfx, LZ4_versionString(), o->ws >> 20, o->passes);
	printf("%s(lz4hc uses 1/4 and zstd 1/2 of the working set, to bound the run time)\n",
	       pfx);
	if (o->file) {
		struct stat sb;

		if (stat(o->file, &sb) == 0)
			printf("%sfile: %s, %lld bytes%s\n", pfx, o->file,
			       (long long)sb.st_size,
			       (uint64_t)sb.st_size < o->ws ?
			       " (repeated to fill the working set)" :
			       " (first working set of it)");
	}
}

/* ---- data ---- */

/* Fill @buf (@bytes, a multiple of @bs) with the file @path, cut into
 * blocks; a file shorter than @bytes is repeated (its last partial block
 * zero-padded each time, as the filesystem would store it). */
static int load_file(const char *path, uint8_t *buf, size_t bytes, uint32_t bs)
{
	FILE *fp = fopen(path, "rb");
	size_t got = 0, n;

	if (!fp)
		return -errno;
	while (got < bytes) {
		n = fread(buf + got, 1, bytes - got, fp);
		if (n == 0) {
			int err = ferror(fp) ? -EIO : got == 0 ? -ENODATA : 0;

			if (err) {
				fclose(fp);
				return err;
			}
			break;
		}
		got += n;
	}
	fclose(fp);
	if (got % bs) {
		memset(buf + got, 0, bs - got % bs);
		got += bs - got % bs;
	}
	for (size_t off = got; off < bytes; off += got)
		memcpy(buf + off, buf, bytes - off < got ? bytes - off : got);
	return 0;
}

static void gen_data(int gen, uint8_t *buf, size_t nblocks, uint32_t bs)
{
	for (size_t i = 0; i < nblocks; i++)
		zr_datagen_fill((enum zr_datagen_kind)gen, 0x5eedull + i,
				buf + i * bs, bs);
}

/* ---- one cell ---- */

/* The same blocks compressed with plain LZ4, for the raw decompression
 * figure. Free with raw_free(). */
struct raw_lz4 {
	uint8_t *packed;	/* compressed blocks, back to back */
	size_t *off;		/* offset of block i in packed */
	int *len;		/* compressed length of block i */
};

static void raw_prepare(struct raw_lz4 *r, const uint8_t *src, size_t nblocks,
			uint32_t bs)
{
	int bound = LZ4_compressBound((int)bs);
	size_t pos = 0;

	r->packed = xmalloc(nblocks * (size_t)bound);
	r->off = xmalloc(nblocks * sizeof(*r->off));
	r->len = xmalloc(nblocks * sizeof(*r->len));
	for (size_t i = 0; i < nblocks; i++) {
		r->len[i] = LZ4_compress_fast((const char *)src + i * bs,
					      (char *)r->packed + pos, (int)bs,
					      bound, 1);
		if (r->len[i] <= 0) {
			fprintf(stderr, "zr_bench: LZ4_compress_fast failed\n");
			exit(2);
		}
		r->off[i] = pos;
		pos += (size_t)r->len[i];
	}
}

static void raw_free(struct raw_lz4 *r)
{
	free(r->packed);
	free(r->off);
	free(r->len);
}

/* LZ4_decompress_safe over blocks [@from, @to). @return seconds. */
static double raw_range(const struct raw_lz4 *r, uint8_t *dst, size_t from,
			size_t to, uint32_t bs)
{
	double t0 = now_s();

	for (size_t i = from; i < to; i++) {
		int n = LZ4_decompress_safe((const char *)r->packed + r->off[i],
					    (char *)dst + i * bs, r->len[i], (int)bs);

		if (n != (int)bs) {
			fprintf(stderr, "zr_bench: LZ4_decompress_safe: %d\n", n);
			exit(2);
		}
	}
	return now_s() - t0;
}

static void check_same(const uint8_t *a, const uint8_t *b, size_t n,
		       const char *what, const char *codec, uint32_t bs)
{
	if (memcmp(a, b, n)) {
		fprintf(stderr, "zr_bench: %s, %s, %u-byte blocks: bytes differ\n",
			what, codec, bs);
		exit(2);
	}
}

/* Times of one pass, in seconds. */
struct pass_times {
	double store;		/* every block into a fresh store */
	double rewrite;		/* every block again: the pool already holds pages */
	double load;		/* every block back */
	double pair_load;	/* store loads in the paired loop, < 0 when not run */
	double pair_raw;	/* raw LZ4 in the paired loop */
};

#define PAIR_CHUNK 64	/* blocks per half-step of the paired loop */

static double load_range(struct zr_file *f, uint8_t *dst, size_t from,
			 size_t to, uint32_t bs)
{
	double t0 = now_s();

	for (size_t i = from; i < to; i++) {
		int rc = zr_file_read(f, i, dst + i * bs);

		if (rc != 1)
			die_rc("zr_file_read", rc ? rc : -ENOENT);
	}
	return now_s() - t0;
}

/*
 * The store's load against raw LZ4 on the same blocks, in small alternating
 * chunks (ABBA order, so neither side always finds the destination in the
 * cache): on a shared machine both sides then see the same interference,
 * which separate passes seconds apart do not.
 */
static void paired_loop(struct zr_file *f, const struct raw_lz4 *raw,
			uint8_t *dst, size_t nblocks, uint32_t bs,
			struct pass_times *t)
{
	t->pair_load = 0;
	t->pair_raw = 0;
	for (size_t i = 0, n = 0; i < nblocks; i += PAIR_CHUNK, n++) {
		size_t end = i + PAIR_CHUNK < nblocks ? i + PAIR_CHUNK : nblocks;

		if (n % 2 == 0) {
			t->pair_load += load_range(f, dst, i, end, bs);
			t->pair_raw += raw_range(raw, dst, i, end, bs);
		} else {
			t->pair_raw += raw_range(raw, dst, i, end, bs);
			t->pair_load += load_range(f, dst, i, end, bs);
		}
	}
}

static double store_all(struct zr_file *f, const uint8_t *src, size_t nblocks,
			uint32_t bs)
{
	double t0 = now_s();

	for (size_t i = 0; i < nblocks; i++) {
		int rc = zr_file_write(f, i, src + i * bs, ZR_WRITE_DIRTY);

		if (rc)
			die_rc("zr_file_write", rc);
	}
	return now_s() - t0;
}

/* One timed pass: store every block into a fresh store, store it again,
 * load it back (compared with @src when @verify, outside the timing); then
 * the paired loop when @raw is not NULL. The stats are taken after the
 * first stores. */
static void run_pass(const struct zr_store_config *cfg, const uint8_t *src,
		     uint8_t *dst, size_t nblocks, const struct raw_lz4 *raw,
		     bool verify, struct pass_times *t, struct zr_stats *stats)
{
	uint32_t bs = cfg->block_size;
	struct zr_store *st;
	struct zr_file *f;
	int rc;

	rc = zr_store_create(cfg, NULL, NULL, &st);
	if (rc)
		die_rc("zr_store_create", rc);
	rc = zr_file_create(st, NULL, &f);
	if (rc)
		die_rc("zr_file_create", rc);

	t->store = store_all(f, src, nblocks, bs);
	zr_store_get_stats(st, stats);
	t->rewrite = store_all(f, src, nblocks, bs);
	if (verify)
		memset(dst, 0xa5, (size_t)nblocks * bs);
	t->load = load_range(f, dst, 0, nblocks, bs);
	if (verify)
		check_same(dst, src, (size_t)nblocks * bs, "store load",
			   zr_codec_name(cfg->comp), bs);
	t->pair_load = -1;
	t->pair_raw = -1;
	if (raw) {
		paired_loop(f, raw, dst, nblocks, bs, t);
		if (verify)
			check_same(dst, src, (size_t)nblocks * bs,
				   "store load / raw LZ4", "lz4", bs);
	}
	zr_file_put(f);
	zr_store_destroy(st);
}

static void run_cell(const struct bench_opts *o, struct cell *c,
		     const struct bench_codec *cd, uint32_t bs,
		     const uint8_t *src, uint8_t *dst)
{
	double ts[MAX_PASSES], tw[MAX_PASSES], tl[MAX_PASSES], tr[MAX_PASSES],
		frac[MAX_PASSES];
	struct zr_stats stats = { 0 };
	struct zr_store_config cfg;
	struct raw_lz4 raw = { 0 };
	bool lz4 = cd->id == ZR_CODEC_LZ4;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.comp = cd->id;
	cfg.comp_level = cd->level;
	cfg.budget = 3 * (uint64_t)o->ws + (64u << 20);

	c->nblocks = o->ws / cd->ws_div / bs;
	c->bytes = (uint64_t)c->nblocks * bs;
	if (lz4)
		raw_prepare(&raw, src, c->nblocks, bs);
	for (unsigned p = 0; p < o->passes; p++) {
		struct pass_times t;
		struct zr_stats st;

		run_pass(&cfg, src, dst, c->nblocks, lz4 ? &raw : NULL, p == 0,
			 &t, &st);
		if (p == 0)
			stats = st;
		ts[p] = t.store;
		tw[p] = t.rewrite;
		tl[p] = t.load;
		tr[p] = t.pair_raw;
		frac[p] = lz4 ? t.pair_raw / t.pair_load : 0;
	}
	c->store_s = median(ts, o->passes);
	c->rewrite_s = median(tw, o->passes);
	c->load_s = median(tl, o->passes);
	c->raw_s = lz4 ? median(tr, o->passes) : -1;
	c->load_frac = lz4 ? median(frac, o->passes) : -1;
	c->orig = stats.orig_data_size;
	c->compr = stats.compr_data_size;
	c->mem = stats.mem_used_total;
	if (lz4)
		raw_free(&raw);
	c->done = true;
}

/* ---- output ---- */

static double mbps(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : INFINITY;
}

static void print_header(const struct bench_opts *o)
{
	if (o->tsv) {
		printf("kind\tblock\tcodec\tstore_MBps\tload_MBps\tstore_us\t"
		       "rewrite_us\tload_us\tratio\tmem_per_orig\traw_lz4_MBps\t"
		       "load_per_raw\n");
		return;
	}
	printf("\n%-6s %5s %-6s %10s %10s %9s %10s %9s %7s %8s %11s %8s\n",
	       "kind", "block", "codec", "store MB/s", "load MB/s", "store us",
	       "rewrite us", "load us", "ratio", "mem/orig", "rawlz4 MB/s",
	       "load/raw");
}

static void print_row(const struct bench_opts *o, const struct bench_kind *k,
		      uint32_t bs, const struct bench_codec *cd,
		      const struct cell *c)
{
	char ratio[32], raw[32], frac[32];
	double us = 1e6 / (double)c->nblocks;

	if (c->compr == 0)
		snprintf(ratio, sizeof(ratio), "inf");
	else
		snprintf(ratio, sizeof(ratio), "%.2f", (double)c->orig / (double)c->compr);
	if (c->raw_s >= 0) {
		snprintf(raw, sizeof(raw), "%.0f", mbps(c->bytes, c->raw_s));
		snprintf(frac, sizeof(frac), "%.0f%%", 100 * c->load_frac);
	} else {
		snprintf(raw, sizeof(raw), "-");
		snprintf(frac, sizeof(frac), "-");
	}
	printf(o->tsv ? "%s\t%uK\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%s\t%.3f\t%s\t%s\n"
		      : "%-6s %4uK %-6s %10.0f %10.0f %9.3f %10.3f %9.3f %7s %8.3f %11s %8s\n",
	       k->label, bs / 1024, cd->label, mbps(c->bytes, c->store_s),
	       mbps(c->bytes, c->load_s), c->store_s * us, c->rewrite_s * us,
	       c->load_s * us, ratio,
	       (double)c->mem / (double)c->bytes, raw, frac);
	fflush(stdout);
}

static int codec_index(const char *label)
{
	for (size_t i = 0; i < NCODECS; i++)
		if (strcmp(codecs[i].label, label) == 0)
			return (int)i;
	return -1;
}

/* A target line; @return true on a miss. */
static bool target_line(const struct bench_opts *o, const char *what,
			bool have, bool pass, const char *figure)
{
	const char *verdict = !have ? "SKIP" : pass ? "PASS" : "MISS";

	printf(o->tsv ? "# target\t%s\t%s\t%s\n" : "%-4s  %s: %s\n",
	       verdict, what, have ? figure : "not measured (cell filtered out)");
	return have && !pass;
}

/* Check the targets on the cells that ran. @return misses. */
static int check_targets(const struct bench_opts *o)
{
	int lz4 = codec_index("lz4"), misses = 0;
	const struct cell *z = &results[0][0][lz4];	/* zero, 4K */
	const struct cell *r = &results[3][0][lz4];	/* random, 4K */
	double worst = INFINITY, worst_other = INFINITY;
	const char *wk = NULL, *wk_other = NULL;
	uint32_t wbs = 0, wbs_other = 0;
	char fig[256];

	printf(o->tsv ? "#\n" : "\ntargets (hot codec lz4; other codecs for information):\n");
	snprintf(fig, sizeof(fig), "%.3f us/block (target <= %.1f us)",
		 z->done ? z->store_s * 1e6 / (double)z->nblocks : 0, TARGET_ZERO_US);
	misses += target_line(o, "store zero 4K block, lz4", z->done,
			      z->done && z->store_s * 1e6 / (double)z->nblocks <= TARGET_ZERO_US,
			      fig);
	snprintf(fig, sizeof(fig), "%.3f us/block (target <= %.1f us)",
		 r->done ? r->store_s * 1e6 / (double)r->nblocks : 0, TARGET_RANDOM_US);
	misses += target_line(o, "store random 4K block, lz4", r->done,
			      r->done && r->store_s * 1e6 / (double)r->nblocks <= TARGET_RANDOM_US,
			      fig);
	/* Only blocks the store keeps lz4-compressed count: zero blocks are a
	 * memset and random ones a raw copy on both sides of the comparison;
	 * their ratios are in the table and in the info line below. */
	for (size_t k = 0; k < NKINDS; k++)
		for (size_t b = 0; b < NBS; b++) {
			const struct cell *c = &results[k][b][lz4];
			bool counted = kinds[k].gen != ZR_DATA_ZERO &&
				       kinds[k].gen != ZR_DATA_RANDOM;

			if (!c->done || c->load_frac < 0)
				continue;
			if (counted && c->load_frac < worst) {
				worst = c->load_frac;
				wk = kinds[k].label;
				wbs = block_sizes[b];
			} else if (!counted && c->load_frac < worst_other) {
				worst_other = c->load_frac;
				wk_other = kinds[k].label;
				wbs_other = block_sizes[b];
			}
		}
	snprintf(fig, sizeof(fig),
		 "worst cell %s %uK: store load at %.0f%% of raw LZ4_decompress_safe "
		 "(target >= %.0f%%)", wk ? wk : "-", wbs / 1024, 100 * worst,
		 100 * TARGET_LOAD_FRAC);
	misses += target_line(o, "lz4 load vs raw LZ4 (text, binary, file)",
			      wk != NULL, worst >= TARGET_LOAD_FRAC, fig);
	if (wk_other)
		printf(o->tsv ? "# info\tzero/random lz4 load vs raw LZ4\tworst %s %uK %.0f%%\n"
			      : "info  zero/random blocks (memset/raw copy, no lz4): worst %s %uK "
				"at %.0f%% of raw LZ4\n",
		       wk_other, wbs_other / 1024, 100 * worst_other);

	for (size_t i = 0; i < NCODECS; i++) {
		const struct cell *zc = &results[0][0][i], *rc = &results[3][0][i];

		if ((int)i == lz4 || (!zc->done && !rc->done))
			continue;
		printf(o->tsv ? "# info\t%s\tzero 4K %.3f us\trandom 4K %.3f us\n"
			      : "info  %-6s: store zero 4K %.3f us/block, random 4K %.3f us/block\n",
		       codecs[i].label,
		       zc->done ? zc->store_s * 1e6 / (double)zc->nblocks : NAN,
		       rc->done ? rc->store_s * 1e6 / (double)rc->nblocks : NAN);
	}
	return misses;
}

/* ---- options ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: zr_bench [--quick] [--tsv] [--file PATH] [--size MiB] [--passes N]\n"
		"                [--kind LIST] [--codec LIST] [--bs LIST] [--strict]\n"
		"Stores and loads blocks through the block store and prints, per data kind x\n"
		"block size x codec: store/load MB/s, us per block, compression ratio,\n"
		"mem_used_total / original bytes, and for lz4 the raw LZ4_decompress_safe\n"
		"speed on the same blocks. Then checks the targets of the issue.\n"
		"  --quick       8 MiB per cell, codecs lz4 and zstd-3 only\n"
		"  --tsv         tab-separated output (comments start with '#')\n"
		"  --file PATH   add the kind 'file': PATH cut into blocks (repeated to\n"
		"                fill the working set when shorter)\n"
		"  --size MiB    working set per cell (default 64, --quick 8)\n"
		"  --passes N    timed passes per cell, median reported (default 3)\n"
		"  --kind LIST   comma-separated subset of zero,text,binary,random,file\n"
		"  --codec LIST  comma-separated subset of lz4,lz4hc,zstd-1,zstd-3,none\n"
		"  --bs LIST     comma-separated subset of 4,16,64 (KiB)\n"
		"  --strict      exit 1 when a target is missed\n");
}

/* Parse a comma list into @on (@n flags) by @match; @return 0 or -EINVAL. */
static int parse_list(const char *arg, bool *on, size_t n,
		      int (*match)(const char *))
{
	char *dup = strdup(arg), *save = NULL, *tok;
	int rc = 0;

	if (!dup)
		return -ENOMEM;
	memset(on, 0, n * sizeof(*on));
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int i = match(tok);

		if (i < 0) {
			fprintf(stderr, "zr_bench: unknown item '%s'\n", tok);
			rc = -EINVAL;
			break;
		}
		on[i] = true;
	}
	free(dup);
	return rc;
}

static int match_kind(const char *s)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (strcmp(kinds[i].label, s) == 0)
			return (int)i;
	return -1;
}

static int match_bs(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end == 'k' || *end == 'K')
		end++;
	for (size_t i = 0; *end == '\0' && i < NBS; i++)
		if (block_sizes[i] == v * 1024)
			return (int)i;
	return -1;
}

static void parse_opts(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "tsv", no_argument, NULL, 't' },
		{ "file", required_argument, NULL, 'f' },
		{ "size", required_argument, NULL, 's' },
		{ "passes", required_argument, NULL, 'p' },
		{ "kind", required_argument, NULL, 'k' },
		{ "codec", required_argument, NULL, 'c' },
		{ "bs", required_argument, NULL, 'b' },
		{ "strict", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool quick = false, codec_set = false, kind_set = false;
	unsigned long mib = 0;
	int ch;

	memset(o, 0, sizeof(*o));
	o->passes = 3;
	for (size_t i = 0; i < NKINDS; i++)
		o->kind_on[i] = true;
	for (size_t i = 0; i < NCODECS; i++)
		o->codec_on[i] = true;
	for (size_t i = 0; i < NBS; i++)
		o->bs_on[i] = true;

	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		char *end;

		switch (ch) {
		case 'q':
			quick = true;
			break;
		case 't':
			o->tsv = true;
			break;
		case 'f':
			o->file = optarg;
			break;
		case 's':
			mib = strtoul(optarg, &end, 10);
			if (*end || mib == 0 || mib > 4096) {
				fprintf(stderr, "zr_bench: bad --size '%s'\n", optarg);
				exit(2);
			}
			break;
		case 'p':
			o->passes = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o->passes == 0 || o->passes > MAX_PASSES) {
				fprintf(stderr, "zr_bench: --passes must be 1..%d\n",
					MAX_PASSES);
				exit(2);
			}
			break;
		case 'k':
			if (parse_list(optarg, o->kind_on, NKINDS, match_kind))
				exit(2);
			kind_set = true;
			break;
		case 'c':
			if (parse_list(optarg, o->codec_on, NCODECS, codec_index))
				exit(2);
			codec_set = true;
			break;
		case 'b':
			if (parse_list(optarg, o->bs_on, NBS, match_bs))
				exit(2);
			break;
		case 'S':
			o->strict = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		usage(stderr);
		exit(2);
	}
	if (quick && !codec_set) {
		for (size_t i = 0; i < NCODECS; i++)
			o->codec_on[i] = false;
		o->codec_on[codec_index("lz4")] = true;
		o->codec_on[codec_index("zstd-3")] = true;
	}
	o->ws = (size_t)(mib ? mib : quick ? 8 : 64) << 20;
	if (!o->file) {
		if (kind_set && o->kind_on[KIND_FILE]) {
			fprintf(stderr, "zr_bench: kind 'file' needs --file PATH\n");
			exit(2);
		}
		o->kind_on[KIND_FILE] = false;
	}
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	uint8_t *src, *dst;
	int misses;

	parse_opts(argc, argv, &o);
	src = xmalloc(o.ws);
	dst = xmalloc(o.ws);
	memset(dst, 0, o.ws);	/* fault the load buffer in before any timing */

	print_machine(&o);
	print_header(&o);
	for (size_t k = 0; k < NKINDS; k++) {
		if (!o.kind_on[k])
			continue;
		for (size_t b = 0; b < NBS; b++) {
			uint32_t bs = block_sizes[b];
			size_t nblocks = o.ws / bs;

			if (!o.bs_on[b])
				continue;
			if (kinds[k].gen >= 0) {
				gen_data(kinds[k].gen, src, nblocks, bs);
			} else {
				int rc = load_file(o.file, src, nblocks * bs, bs);

				if (rc) {
					fprintf(stderr, "zr_bench: %s: %s\n", o.file,
						strerror(-rc));
					return 2;
				}
			}
			for (size_t i = 0; i < NCODECS; i++) {
				if (!o.codec_on[i])
					continue;
				run_cell(&o, &results[k][b][i], &codecs[i], bs, src, dst);
				print_row(&o, &kinds[k], bs, &codecs[i], &results[k][b][i]);
			}
		}
	}
	misses = check_targets(&o);
	zr_codec_ctx_thread_free();
	free(src);
	free(dst);
	return o.strict && misses ? 1 : 0;
}
