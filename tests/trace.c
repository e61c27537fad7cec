// SPDX-License-Identifier: GPL-2.0-or-later
/* trace.c - block-access traces: text loader, synthetic generators, replay through a store. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "trace.h"
#include "zr_util.h"

void zr_trace_init(struct zr_trace *t)
{
	memset(t, 0, sizeof(*t));
}

void zr_trace_free(struct zr_trace *t)
{
	free(t->ev);
	free(t->kind);
	zr_trace_init(t);
}

static int grow_files(struct zr_trace *t, uint32_t file)
{
	uint32_t n;
	uint8_t *k;

	if (file < t->nfiles)
		return 0;
	if (file >= (1u << 28))
		return -EINVAL;
	n = ZR_MAX(file + 1, t->nfiles * 2);
	k = realloc(t->kind, n);
	if (!k)
		return -ENOMEM;
	memset(k + t->nfiles, ZR_DATA_MIXED, n - t->nfiles);
	t->kind = k;
	t->nfiles = n;
	return 0;
}

int zr_trace_add(struct zr_trace *t, char op, uint32_t file, uint64_t block,
		 uint32_t len)
{
	int rc;

	if (op != ZR_TRACE_READ && op != ZR_TRACE_WRITE && op != ZR_TRACE_DELETE)
		return -EINVAL;
	rc = grow_files(t, file);
	if (rc)
		return rc;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct zr_trace_event *ev = realloc(t->ev, cap * sizeof(*ev));

		if (!ev)
			return -ENOMEM;
		t->ev = ev;
		t->cap = cap;
	}
	t->ev[t->n].op = op;
	t->ev[t->n].file = file;
	t->ev[t->n].block = block;
	t->ev[t->n].len = op == ZR_TRACE_READ ? len : 0;
	t->n++;
	return 0;
}

int zr_trace_set_kind(struct zr_trace *t, uint32_t file, int kind)
{
	int rc;

	if (kind < 0 || kind >= ZR_DATA_COUNT)
		return -EINVAL;
	rc = grow_files(t, file);
	if (!rc)
		t->kind[file] = (uint8_t)kind;
	return rc;
}

int zr_trace_load(struct zr_trace *t, const char *path, unsigned *line)
{
	char buf[256], op, kind[32];
	unsigned long long file, block, len;
	FILE *fp = fopen(path, "r");
	int rc = 0, n;

	*line = 0;
	if (!fp)
		return -errno;
	while (!rc && fgets(buf, sizeof(buf), fp)) {
		char *p = buf;

		(*line)++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		len = 0;
		if (*p == 'k') {
			if (sscanf(p, "k %llu %31s", &file, kind) != 2 || file > UINT32_MAX)
				rc = -EINVAL;
			else
				rc = zr_trace_set_kind(t, (uint32_t)file, zr_datagen_by_name(kind));
			continue;
		}
		if (*p == 'd') {
			n = sscanf(p, "d %llu", &file);
			block = 0;
			op = 'd';
			if (n != 1)
				rc = -EINVAL;
		} else {
			n = sscanf(p, "%c %llu %llu %llu", &op, &file, &block, &len);
			if (n < 3 || (op == 'w' && n != 3) || len > UINT32_MAX)
				rc = -EINVAL;
		}
		if (!rc && file > UINT32_MAX)
			rc = -EINVAL;
		if (!rc)
			rc = zr_trace_add(t, op, (uint32_t)file, block, (uint32_t)len);
	}
	fclose(fp);
	if (!rc)
		*line = 0;
	return rc;
}

/* ---- synthetic traces ---- */

#define MIX_TEMP_LIVE 64	/* temp files alive at once, at most */

struct temp_file {
	uint32_t id;
	uint32_t nblocks;
	uint32_t last_len;	/* bytes in the last block */
	uint32_t death;		/* round it is deleted in */
};

static int gen_mix(struct zr_trace *t, uint32_t bs, uint64_t budget, uint64_t seed)
{
	uint64_t nb = ZR_MAX(budget / bs, 16u);	/* raw blocks that fit the budget */
	uint64_t hot_blocks = nb, scan_blocks = 8 * nb, scan_pos = 0;
	uint32_t hot_files = (uint32_t)((hot_blocks + 15) / 16);
	uint32_t scan_file = hot_files, next_temp = hot_files + 1;
	uint64_t rounds = scan_blocks / 2, r, rng = seed;
	struct temp_file live[MIX_TEMP_LIVE];
	unsigned nlive = 0, i;
	int rc = 0;

	for (i = 0; i < hot_files && !rc; i++)
		rc = zr_trace_set_kind(t, i, ZR_DATA_TEXT);
	if (!rc)
		rc = zr_trace_set_kind(t, scan_file, ZR_DATA_RANDOM);
	for (r = 0; r < rounds && !rc; r++) {
		/* The hot set: six reads spread uniformly over it. */
		for (i = 0; i < 6 && !rc; i++) {
			uint64_t h = zr_datagen_below(&rng, hot_blocks);

			rc = zr_trace_add(t, 'r', (uint32_t)(h / 16), h % 16, 0);
		}
		/* The scan: two new blocks, read once. */
		for (i = 0; i < 2 && !rc; i++)
			rc = zr_trace_add(t, 'r', scan_file, scan_pos++, 0);
		/* A temp file every other round, written whole. */
		if (r % 2 == 0 && nlive < MIX_TEMP_LIVE && !rc) {
			struct temp_file *tf = &live[nlive++];
			uint32_t b;

			tf->id = next_temp++;
			tf->nblocks = 1 + (uint32_t)zr_datagen_below(&rng, 8);
			tf->last_len = 1 + (uint32_t)zr_datagen_below(&rng, bs);
			tf->death = (uint32_t)(r + 4 + zr_datagen_below(&rng, 6));
			rc = zr_trace_set_kind(t, tf->id, ZR_DATA_MIXED);
			for (b = 0; b < tf->nblocks && !rc; b++)
				rc = zr_trace_add(t, 'w', tf->id, b, 0);
		}
		/* Read a block of a live temp file; delete those that are done. */
		if (nlive && !rc) {
			struct temp_file *tf = &live[zr_datagen_below(&rng, nlive)];
			uint32_t b = (uint32_t)zr_datagen_below(&rng, tf->nblocks);

			rc = zr_trace_add(t, 'r', tf->id, b,
					  b + 1 == tf->nblocks ? tf->last_len : 0);
		}
		for (i = 0; i < nlive && !rc; ) {
			if (live[i].death <= r) {
				rc = zr_trace_add(t, 'd', live[i].id, 0, 0);
				live[i] = live[--nlive];
			} else {
				i++;
			}
		}
	}
	for (i = 0; i < nlive && !rc; i++)
		rc = zr_trace_add(t, 'd', live[i].id, 0, 0);
	return rc;
}

int zr_trace_synthetic(struct zr_trace *t, const char *name,
		       uint32_t block_size, uint64_t budget, uint64_t seed)
{
	if (!strcmp(name, "mix"))
		return gen_mix(t, block_size, budget, seed);
	return -EINVAL;
}

/* ---- replay ---- */

struct replay {
	const struct zr_trace *t;
	struct zr_trace_result *r;
	uint32_t bs;
	bool verify;
	unsigned char *exp;	/* scratch for the writeback check */
};

static inline uint64_t block_seed(uint32_t file, uint64_t block)
{
	return ((uint64_t)file << 32) ^ block;
}

static void gen_block(const struct zr_trace *t, uint32_t file, uint64_t block,
		      void *buf, uint32_t bs)
{
	zr_datagen_fill((enum zr_datagen_kind)t->kind[file], block_seed(file, block), buf, bs);
}

static int replay_writeback(void *ctx, void *owner, uint64_t index,
			    unsigned nblocks, const void *buf)
{
	struct replay *rp = ctx;
	uint32_t file = (uint32_t)((uintptr_t)owner - 1);
	unsigned i;

	rp->r->bytes_written_back += (uint64_t)nblocks * rp->bs;
	for (i = 0; rp->verify && i < nblocks; i++) {
		gen_block(rp->t, file, index + i, rp->exp, rp->bs);
		if (memcmp(rp->exp, (const char *)buf + (size_t)i * rp->bs, rp->bs))
			rp->r->verify_errors++;
	}
	return 0;
}

int zr_trace_replay(const struct zr_trace *t, const struct zr_trace_opts *o,
		    struct zr_trace_result *r)
{
	static const struct zr_store_ops ops = { .writeback = replay_writeback };
	struct zr_store_config cfg;
	struct zr_store *st = NULL;
	struct zr_file **files = NULL;
	unsigned char *buf = NULL, *exp = NULL;
	struct replay rp;
	struct zr_stats s;
	uint64_t t0 = zr_now_ns();
	uint32_t bs = o->block_size;
	size_t i;
	int rc;

	memset(r, 0, sizeof(*r));
	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.budget = o->budget;
	cfg.policy = o->policy;
	rp.t = t;
	rp.r = r;
	rp.bs = bs;
	rp.verify = o->verify;
	files = calloc(ZR_MAX(t->nfiles, 1u), sizeof(*files));
	buf = malloc(bs);
	exp = malloc(bs);
	rp.exp = malloc(bs);
	rc = (!files || !buf || !exp || !rp.exp) ? -ENOMEM : 0;
	if (!rc)
		rc = zr_store_create(&cfg, &ops, &rp, &st);
	for (i = 0; !rc && i < t->n; i++) {
		const struct zr_trace_event *e = &t->ev[i];
		struct zr_file **fp = &files[e->file];
		uint32_t len = e->len && e->len < bs ? e->len : bs;

		if (e->op == ZR_TRACE_DELETE) {
			r->deletes++;
			zr_file_put(*fp);
			*fp = NULL;
			continue;
		}
		if (!*fp && zr_file_create(st, (void *)(uintptr_t)(e->file + 1), fp)) {
			r->errors++;
			continue;
		}
		if (e->op == ZR_TRACE_READ) {
			int hit;

			r->reads++;
			r->bytes_requested += len;
			hit = zr_file_read(*fp, e->block, buf);
			if (hit == 1) {
				r->hits++;
				r->bytes_hit += len;
				if (o->verify) {
					gen_block(t, e->file, e->block, exp, bs);
					if (memcmp(exp, buf, bs))
						r->verify_errors++;
				}
				continue;
			}
			if (hit < 0) {
				r->errors++;
				continue;
			}
			/* A miss: read the block back from "disk", insert it clean. */
			r->bytes_read_back += bs;
			gen_block(t, e->file, e->block, buf, bs);
			if (zr_store_make_room(st, bs) == 0 &&
			    zr_file_write(*fp, e->block, buf, ZR_WRITE_CLEAN))
				r->errors++;
		} else {
			r->writes++;
			gen_block(t, e->file, e->block, buf, bs);
			if (zr_store_make_room(st, bs)) {
				r->enospc++;
				continue;
			}
			if (zr_file_write(*fp, e->block, buf, ZR_WRITE_DIRTY))
				r->errors++;
		}
	}
	for (i = 0; files && i < t->nfiles; i++)
		zr_file_put(files[i]);
	if (st) {
		zr_store_get_stats(st, &s);
		r->recompressions = s.recompressions;
		r->demotions = s.demotions;
		r->mem_used_max = s.mem_used_max;
		zr_store_destroy(st);
	}
	free(files);
	free(buf);
	free(exp);
	free(rp.exp);
	r->seconds = (double)(zr_now_ns() - t0) / 1e9;
	return rc;
}

void zr_trace_print_header(FILE *out)
{
	fprintf(out, "%-9s %9s %7s %9s %14s %14s %9s %9s %7s\n", "policy", "reads",
		"hit%", "bytehit%", "read_back", "written_back", "recompr", "demoted",
		"secs");
}

void zr_trace_print_row(FILE *out, const char *name, const struct zr_trace_result *r)
{
	fprintf(out, "%-9s %9" PRIu64 " %7.2f %9.2f %14" PRIu64 " %14" PRIu64
		" %9" PRIu64 " %9" PRIu64 " %7.2f\n",
		name, r->reads,
		r->reads ? 100.0 * (double)r->hits / (double)r->reads : 0.0,
		r->bytes_requested ? 100.0 * (double)r->bytes_hit / (double)r->bytes_requested : 0.0,
		r->bytes_read_back, r->bytes_written_back, r->recompressions,
		r->demotions, r->seconds);
}
