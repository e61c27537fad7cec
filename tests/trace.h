/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * trace.h - block-access traces and their replay through a block store, to
 * compare demotion policies.
 *
 * A trace is a list of events (file id, block index, op). Files are small
 * integers; each has a data kind (tests/datagen.h) that makes the contents
 * of its blocks realistic and deterministic: block B of file F holds
 * zr_datagen_fill(kind(F), F << 32 ^ B). Replaying a trace runs it through
 * a store of a given budget and policy: a read miss "reads back" the block
 * from an imaginary disk and inserts it clean; writes are stored dirty; the
 * writeback callback counts what reaches the disk.
 *
 * Text format, one event a line ('#' starts a comment):
 *   r FILE BLOCK [LEN]   read LEN bytes (default: the whole block)
 *   w FILE BLOCK         write the whole block
 *   d FILE               delete the file (its blocks, dirty ones too, go)
 *   k FILE KIND          data kind of the file: zero, same, text, binary,
 *                        random, mixed (default mixed)
 */
#ifndef ZR_TRACE_H
#define ZR_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zr_store.h"

enum zr_trace_op {
	ZR_TRACE_READ = 'r',
	ZR_TRACE_WRITE = 'w',
	ZR_TRACE_DELETE = 'd',
};

struct zr_trace_event {
	uint64_t block;		/* block index */
	uint32_t file;		/* file id */
	uint32_t len;		/* bytes read (0 = whole block); reads only */
	char op;		/* enum zr_trace_op */
};

struct zr_trace {
	struct zr_trace_event *ev;	/* events in order */
	size_t n, cap;
	uint8_t *kind;			/* data kind per file id */
	uint32_t nfiles;		/* file ids are < nfiles */
};

/** Empty trace; free it with zr_trace_free(). */
void zr_trace_init(struct zr_trace *t);

/** Free a trace's memory (the struct itself is the caller's). */
void zr_trace_free(struct zr_trace *t);

/** Append an event. @return 0, -EINVAL for a bad op, -ENOMEM. */
int zr_trace_add(struct zr_trace *t, char op, uint32_t file, uint64_t block,
		 uint32_t len);

/** Set the data kind of @file. @return 0 or -ENOMEM / -EINVAL. */
int zr_trace_set_kind(struct zr_trace *t, uint32_t file, int kind);

/**
 * zr_trace_load() - read a trace in the text format from @path.
 * @return 0, -errno from fopen, or -EINVAL with the line number in *@line.
 */
int zr_trace_load(struct zr_trace *t, const char *path, unsigned *line);

/**
 * zr_trace_synthetic() - generate the named trace ("mix") sized for a store
 * of @budget bytes and @block_size blocks, deterministic in @seed.
 *
 * "mix": a hot set of well-compressing (text) blocks, about a budget's worth
 * uncompressed, read over and over; interleaved with a long sequential scan
 * of incompressible blocks (8 budgets' worth, each read once); and a stream
 * of short-lived temporary files of mixed data (1..8 blocks, written, read
 * a few times, deleted a few rounds later).
 * @return 0, -EINVAL for an unknown name, -ENOMEM.
 */
int zr_trace_synthetic(struct zr_trace *t, const char *name,
		       uint32_t block_size, uint64_t budget, uint64_t seed);

struct zr_trace_opts {
	enum zr_policy_kind policy;
	uint64_t budget;
	uint32_t block_size;
	bool verify;		/* compare every hit and written block with the generator */
};

struct zr_trace_result {
	uint64_t reads, hits, writes, deletes;
	uint64_t bytes_requested;	/* bytes the reads asked for */
	uint64_t bytes_hit;		/* of which served from RAM */
	uint64_t bytes_read_back;	/* whole blocks read from "disk" on misses */
	uint64_t bytes_written_back;	/* bytes the writeback callback got */
	uint64_t enospc;		/* writes refused by make_room */
	uint64_t errors;		/* reads/writes that failed otherwise */
	uint64_t verify_errors;		/* data that did not match (must be 0) */
	uint64_t recompressions, demotions;
	uint64_t mem_used_max;
	double seconds;
};

/**
 * zr_trace_replay() - run @t through a new store configured by @o.
 * @return 0, or -errno when the store could not be made.
 */
int zr_trace_replay(const struct zr_trace *t, const struct zr_trace_opts *o,
		    struct zr_trace_result *r);

/** Print a table header and one row per result (@name: the policy). */
void zr_trace_print_header(FILE *out);
void zr_trace_print_row(FILE *out, const char *name,
			const struct zr_trace_result *r);

#endif /* ZR_TRACE_H */
