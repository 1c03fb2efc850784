// SPDX-License-Identifier: Apache-2.0
/*
 * Table-build benchmark driver: for each ELF file named, compiles its
 * unwind table RUNS times (best time wins, as a warm agent would see it)
 * and prints one markdown row, then a total row when TOTAL_LABEL is set.
 *   unwind_tables [-r RUNS] [-t TOTAL_LABEL] [-H] FILE...
 * -H prints the table header first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unwind/unwind_table.h"

struct totals {
	uint64_t cfi_bytes, rows, unsupported, files;
	double ms;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void print_row(const char *name, uint64_t cfi_bytes, uint64_t rows, uint64_t unsupported,
		      double ms)
{
	double table = (double)rows * sizeof(struct unwind_row);

	printf("| %s | %.0f | %llu | %.0f | %.0f | %llu | %.1f |\n", name, cfi_bytes / 1024.0,
	       (unsigned long long)rows, table / 1024.0,
	       cfi_bytes ? table / (cfi_bytes / 1048576.0) : 0.0, (unsigned long long)unsupported,
	       ms);
}

/* Builds file's table runs times; 0 and one printed row, or -errno. */
static int bench_file(const char *file, int runs, struct totals *tot)
{
	struct unwind_table *t = NULL;
	double best = 0;
	int fd, err = 0;

	for (int i = 0; i < runs && !err; i++) {
		double t0;

		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		unwind_table__free(t);
		t0 = now_ms();
		err = unwind_table__build(fd, &t);
		t0 = now_ms() - t0;
		close(fd);
		if (!i || t0 < best)
			best = t0;
	}
	if (err) {
		printf("| %s | - | %s | - | - | - | - |\n", file, strerror(-err));
		return err;
	}
	print_row(file, t->st.cfi_bytes, t->nrows, t->st.unsupported_ranges, best);
	tot->cfi_bytes += t->st.cfi_bytes;
	tot->rows += t->nrows;
	tot->unsupported += t->st.unsupported_ranges;
	tot->ms += best;
	tot->files++;
	unwind_table__free(t);
	return 0;
}

int main(int argc, char **argv)
{
	struct totals tot = { 0 };
	const char *total = NULL;
	int runs = 3, opt, fails = 0;

	while ((opt = getopt(argc, argv, "r:t:H")) != -1) {
		switch (opt) {
		case 'r':
			runs = atoi(optarg);
			if (runs < 1)
				runs = 1;
			break;
		case 't':
			total = optarg;
			break;
		case 'H':
			printf("| file | CFI KiB | rows | table KiB | table bytes per MiB CFI | "
			       "unsupported rows | build ms |\n");
			printf("|---|---:|---:|---:|---:|---:|---:|\n");
			break;
		default:
			fprintf(stderr, "usage: %s [-r RUNS] [-t TOTAL_LABEL] [-H] FILE...\n",
				argv[0]);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++)
		if (bench_file(argv[i], runs, &tot))
			fails++;
	if (total) {
		char label[256];

		snprintf(label, sizeof(label), "**%s (%llu files)**", total,
			 (unsigned long long)tot.files);
		print_row(label, tot.cfi_bytes, tot.rows, tot.unsupported, tot.ms);
	}
	return fails == argc - optind && fails ? 1 : 0;
}
