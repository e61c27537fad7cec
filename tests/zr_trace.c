// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_trace.c - replay a block-access trace through the store and compare policies. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "zr_util.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: zr_trace [--policy adaptive|lru] [--both] [--budget SIZE]\n"
		"                [--block-size N] [--trace FILE | --synthetic mix]\n"
		"                [--seed N] [--verify]\n"
		"Replays a block trace through a store and prints hit ratio, byte hit\n"
		"ratio, bytes read back on misses and bytes written back.\n"
		"Defaults: --policy adaptive --budget 32M --block-size 64K --synthetic mix.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "budget", required_argument, NULL, 'b' },
		{ "block-size", required_argument, NULL, 's' },
		{ "trace", required_argument, NULL, 't' },
		{ "synthetic", required_argument, NULL, 'S' },
		{ "seed", required_argument, NULL, 'r' },
		{ "both", no_argument, NULL, 'B' },
		{ "verify", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct zr_trace_opts o = { .policy = ZR_POLICY_ADAPTIVE, .budget = 32u << 20,
				   .block_size = 64u << 10 };
	const char *trace_file = NULL, *synthetic = "mix";
	struct zr_trace_result res;
	struct zr_trace t;
	uint64_t v, seed = 1;
	bool both = false;
	unsigned line;
	int c, rc, k;

	while ((c = getopt_long(argc, argv, "p:b:s:t:S:r:Bvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!strcmp(optarg, "adaptive"))
				o.policy = ZR_POLICY_ADAPTIVE;
			else if (!strcmp(optarg, "lru"))
				o.policy = ZR_POLICY_LRU;
			else {
				fprintf(stderr, "zr_trace: unknown policy '%s'\n", optarg);
				return 2;
			}
			break;
		case 'b':
		case 's':
			if (zr_parse_size(optarg, zr_ram_bytes(), &v) || v == 0 ||
			    (c == 's' && v > ZR_BLOCK_MAX)) {
				fprintf(stderr, "zr_trace: bad size '%s'\n", optarg);
				return 2;
			}
			if (c == 'b')
				o.budget = v;
			else
				o.block_size = (uint32_t)v;
			break;
		case 't':
			trace_file = optarg;
			break;
		case 'S':
			synthetic = optarg;
			break;
		case 'r':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'B':
			both = true;
			break;
		case 'v':
			o.verify = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	zr_trace_init(&t);
	if (trace_file) {
		rc = zr_trace_load(&t, trace_file, &line);
		if (rc) {
			if (line)
				fprintf(stderr, "zr_trace: %s:%u: bad line\n", trace_file, line);
			else
				fprintf(stderr, "zr_trace: %s: %s\n", trace_file, strerror(-rc));
			return 1;
		}
	} else {
		rc = zr_trace_synthetic(&t, synthetic, o.block_size, o.budget, seed);
		if (rc) {
			fprintf(stderr, "zr_trace: synthetic trace '%s': %s\n", synthetic,
				strerror(-rc));
			return 1;
		}
	}
	printf("trace: %s, %zu events, budget %llu bytes, block size %u\n",
	       trace_file ? trace_file : synthetic, t.n, (unsigned long long)o.budget,
	       o.block_size);
	zr_trace_print_header(stdout);
	for (k = 0; k < 2; k++) {
		struct zr_trace_opts run = o;

		if (both)
			run.policy = k == 0 ? ZR_POLICY_ADAPTIVE : ZR_POLICY_LRU;
		else if (k == 1)
			break;
		rc = zr_trace_replay(&t, &run, &res);
		if (rc) {
			fprintf(stderr, "zr_trace: replay: %s\n", strerror(-rc));
			zr_trace_free(&t);
			return 1;
		}
		zr_trace_print_row(stdout, run.policy == ZR_POLICY_LRU ? "lru" : "adaptive", &res);
		if (res.verify_errors || res.errors)
			fprintf(stderr, "zr_trace: %llu verify errors, %llu errors\n",
				(unsigned long long)res.verify_errors,
				(unsigned long long)res.errors);
	}
	zr_trace_free(&t);
	return 0;
}
