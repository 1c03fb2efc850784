// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests: ELF/DWARF symbolization of this very binary (built -O2 -g),
 * libc through its .dynsym / debug file, demangling, and kallsyms.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/proc/proc_maps.h"
#include "symbolize/buildid.h"
#include "symbolize/debuglink.h"
#include "symbolize/symbolize.h"

/* --- code under test: known names and lines --------------------------- */

struct probe {
	uintptr_t ra;
	unsigned inl_line, outer_line;
};

__attribute__((noinline)) void record_ra(struct probe *p)
{
	p->ra = (uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

/* Each line that matters records its own number on that same line (so the
 * formatter must leave these two functions alone). */
// clang-format off
static inline __attribute__((always_inline)) int inl_body(struct probe *p, int x)
{
	p->inl_line = __LINE__; record_ra(p);
	return x * 3;
}

__attribute__((noinline)) int outer_func(struct probe *p, int x)
{
	int r;

	p->outer_line = __LINE__; r = inl_body(p, x);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}
// clang-format on

static const unsigned sym_target_line = __LINE__ + 1;
__attribute__((noinline)) int sym_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 7 + 1;
}

/* --- helpers -------------------------------------------------------------- */

static int suffix(const char *s, const char *x)
{
	size_t ls = s ? strlen(s) : 0, lx = strlen(x);

	return s && ls >= lx && !strcmp(s + ls - lx, x);
}

/* The mapping holding addr and the file offset of addr in it. */
static void locate(uintptr_t addr, char *path, size_t psz, uint64_t *off)
{
	struct proc_map *maps = NULL;
	size_t n = 0;
	int found = 0;

	assert_int_equal(proc_maps__read(getpid(), 0, &maps, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (addr < maps[i].start || addr >= maps[i].end)
			continue;
		snprintf(path, psz, "%s", maps[i].path);
		*off = addr - maps[i].start + maps[i].pgoff;
		found = 1;
	}
	free(maps);
	assert_true(found);
}

static struct symbolizer *new_sym(size_t max_modules, size_t max_cache, int debuginfod)
{
	struct symbolizer_opts o = {
		.sz = sizeof(o),
		.max_modules = max_modules,
		.max_cache = max_cache,
		.use_debuginfod = debuginfod,
	};
	struct symbolizer *s = symbolizer__new(&o);

	assert_non_null(s);
	return s;
}

static void self_path(char *buf, size_t sz)
{
	ssize_t n = readlink("/proc/self/exe", buf, sz - 1);

	assert_true(n > 0);
	buf[n] = '\0';
}

/* --- symbolizer ----------------------------------------------------------- */

/* sym_target's entry resolves to itself, its file and its prologue line. */
static void check_function_entry(struct symbolizer *s)
{
	struct sym_frame f[SYM_MAX_INLINE];
	char path[PROC_MAP_PATH_MAX];
	uint64_t off;
	int n;

	locate((uintptr_t)&sym_target, path, sizeof(path), &off);
	n = symbolizer__resolve(s, path, NULL, 0, off, f, SYM_MAX_INLINE);
	assert_int_equal(n, 1);
	assert_string_equal(f[0].func, "sym_target");
	assert_true(suffix(f[0].file, "test_symbolize.c"));
	/* The prologue's line: the declarator (clang) or the brace (gcc). */
	assert_in_range(f[0].line, sym_target_line, sym_target_line + 1);
	assert_int_equal(f[0].inlined, 0);
}

static void test_function_entry(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);

	check_function_entry(s);
	symbolizer__free(s);
}

/* The agent's mode (symbolizer_opts.hostile_files: read, never mapped)
 * gives the same answer. */
static void test_hostile_files(void **state)
{
	struct symbolizer_opts o = { .sz = sizeof(o), .hostile_files = 1 };
	struct symbolizer *s = symbolizer__new(&o);

	assert_non_null(s);
	check_function_entry(s);
	symbolizer__free(s);
}

static void test_inline_chain(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[SYM_MAX_INLINE];
	char path[PROC_MAP_PATH_MAX];
	struct probe p = { 0 };
	uint64_t off;
	int n;

	assert_int_equal(outer_func(&p, 2), 7);
	/* A return address: the call instruction is the byte before it. */
	locate(p.ra - 1, path, sizeof(path), &off);
	n = symbolizer__resolve(s, path, NULL, 0, off, f, SYM_MAX_INLINE);
	assert_int_equal(n, 2);
	assert_string_equal(f[0].func, "inl_body");
	assert_int_equal(f[0].inlined, 1);
	assert_true(suffix(f[0].file, "test_symbolize.c"));
	assert_int_equal(f[0].line, p.inl_line);
	assert_string_equal(f[1].func, "outer_func");
	assert_int_equal(f[1].inlined, 0);
	assert_true(suffix(f[1].file, "test_symbolize.c"));
	assert_int_equal(f[1].line, p.outer_line);

	/* Room for one frame: the real function is the one kept. */
	n = symbolizer__resolve(s, path, NULL, 0, off, f, 1);
	assert_int_equal(n, 1);
	assert_string_equal(f[0].func, "outer_func");
	assert_int_equal(f[0].inlined, 0);
	symbolizer__free(s);
}

struct nm_sym {
	uint64_t addr, size;
	char name[128];
};

static int cmp_nm(const void *a, const void *b)
{
	const struct nm_sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * An address in no symbol: the first byte after a function that no other
 * symbol covers (alignment padding), found with nm independently.
 */
static void test_padding_unresolved(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[SYM_MAX_INLINE];
	char exe[PROC_MAP_PATH_MAX], cmd[PROC_MAP_PATH_MAX + 64], line[512];
	char path[PROC_MAP_PATH_MAX];
	struct nm_sym *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t bias = 0, off;
	int have_bias = 0, tested = 0;
	FILE *p;

	self_path(exe, sizeof(exe));
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", exe);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		struct nm_sym e = { 0 };
		char type;

		if (sscanf(line, "%lx %lx %c %127s", &e.addr, &e.size, &type, e.name) != 4 ||
		    !strchr("tTwWiI", type))
			continue;
		if (!strcmp(e.name, "sym_target")) {
			bias = (uintptr_t)&sym_target - e.addr;
			have_bias = 1;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n++] = e;
	}
	pclose(p);
	assert_true(have_bias);
	qsort(v, n, sizeof(*v), cmp_nm);
	for (size_t i = 0; i + 1 < n && tested < 20; i++) {
		uint64_t gap = v[i].addr + v[i].size;
		int covered = 0;

		if (v[i + 1].addr <= gap)
			continue;
		for (size_t j = 0; j < n && !covered; j++)
			covered = v[j].addr <= gap && gap < v[j].addr + (v[j].size ? v[j].size : 1);
		if (covered)
			continue;
		/* Only gaps inside our own executable code count. */
		struct proc_map *maps = NULL;
		size_t nm = 0;
		int exec = 0;

		assert_int_equal(proc_maps__read(getpid(), 1, &maps, &nm), 0);
		for (size_t k = 0; k < nm; k++)
			exec |= gap + bias >= maps[k].start && gap + bias < maps[k].end &&
				!strcmp(maps[k].path, exe);
		free(maps);
		if (!exec)
			continue;
		locate(gap + bias, path, sizeof(path), &off);
		int r = symbolizer__resolve(s, path, NULL, 0, off, f, 4);

		if (r != 0)
			fail_msg("gap after %s (+0x%lx) resolved to %s", v[i].name, v[i].size,
				 f[0].func);
		tested++;
	}
	assert_true(tested > 0);
	free(v);
	symbolizer__free(s);
}

static void test_outside_code(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[4];
	char exe[PROC_MAP_PATH_MAX];
	struct stat st;

	self_path(exe, sizeof(exe));
	assert_int_equal(stat(exe, &st), 0);
	/* The ELF header: mapped, but no function. */
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, 0, f, 4), 0);
	/* Past the end of the file and of every segment. */
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, (uint64_t)st.st_size + 4096, f, 4),
			 0);
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, UINT64_MAX, f, 4), 0);
	symbolizer__free(s);
}

static void *libc_qsort(char *path, size_t psz, uint64_t *off)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *fn;

	assert_non_null(h);
	/* dlsym on libc's handle: the real qsort, not ASan's interceptor. */
	fn = dlsym(h, "qsort");
	assert_non_null(fn);
	locate((uintptr_t)fn, path, psz, off);
	assert_non_null(strstr(path, "libc"));
	dlclose(h);
	return fn;
}

static void test_libc(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[SYM_MAX_INLINE];
	char path[PROC_MAP_PATH_MAX];
	uint64_t off;
	int n;

	libc_qsort(path, sizeof(path), &off);
	n = symbolizer__resolve(s, path, NULL, 0, off, f, SYM_MAX_INLINE);
	assert_true(n >= 1);
	assert_non_null(strstr(f[n - 1].func, "qsort"));
	assert_int_equal(f[n - 1].inlined, 0);
	symbolizer__free(s);
}

/* libc copied with only .dynsym left (no symtab, debuglink or build-id). */
static void test_dynsym_only(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[SYM_MAX_INLINE];
	char path[PROC_MAP_PATH_MAX], tmp[] = "/tmp/strata-test-libc-XXXXXX";
	char cmd[2 * PROC_MAP_PATH_MAX];
	uint64_t off;
	int fd, n;

	libc_qsort(path, sizeof(path), &off);
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --strip-all -R .gnu_debuglink -R .note.gnu.build-id '%s' %s 2>/dev/null",
		 path, tmp);
	if (system(cmd) != 0) {
		unlink(tmp);
		skip();
	}
	n = symbolizer__resolve(s, tmp, NULL, 0, off, f, SYM_MAX_INLINE);
	assert_int_equal(n, 1);
	assert_non_null(strstr(f[0].func, "qsort"));
	assert_null(f[0].file);
	assert_int_equal(f[0].line, 0);
	unlink(tmp);
	symbolizer__free(s);
}

static void test_caches(void **state)
{
	struct symbolizer *s = new_sym(1, 2, 0);
	struct sym_frame f[SYM_MAX_INLINE], g[SYM_MAX_INLINE];
	char exe[PROC_MAP_PATH_MAX], libc[PROC_MAP_PATH_MAX];
	struct symbolizer_stats st;
	uint64_t off, loff, off2;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	locate((uintptr_t)&outer_func, exe, sizeof(exe), &off2);
	libc_qsort(libc, sizeof(libc), &loff);

	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, off, f, 4), 1);
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, off, g, 4), 1);
	assert_ptr_equal(f[0].func, g[0].func); /* same interned string */
	symbolizer__stats(s, &st);
	assert_true(st.lookups == 2 && st.cache_hits == 1);

	/* max_modules = 1: libc pushes our binary out, and back. */
	assert_true(symbolizer__resolve(s, libc, NULL, 0, loff, g, 4) >= 1);
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, off2, g, 4), 1);
	symbolizer__stats(s, &st);
	assert_true(st.module_evicted >= 2);
	assert_true(st.modules_open == 1);
	/* Strings outlive their module. */
	assert_string_equal(f[0].func, "sym_target");

	/* max_cache = 2 (one set of two ways): a third offset evicts. */
	assert_true(st.cache_entries <= 2);
	assert_true(st.cache_evicted >= 1);
	symbolizer__free(s);
}

/* Keyed by path: a file replaced under the same path is not stale. */
static void test_path_identity(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	char exe[PROC_MAP_PATH_MAX], libc[PROC_MAP_PATH_MAX];
	char tmp[] = "/tmp/strata-test-replace-XXXXXX";
	char cmd[3 * PROC_MAP_PATH_MAX];
	struct sym_frame f[4];
	uint64_t off, loff;
	int fd, n;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	libc_qsort(libc, sizeof(libc), &loff);
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "cp '%s' %s", exe, tmp);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(symbolizer__resolve(s, tmp, NULL, 0, off, f, 4), 1);
	assert_string_equal(f[0].func, "sym_target");

	/* A new file (new inode) at the same path. */
	snprintf(cmd, sizeof(cmd), "cp '%s' %s.new && mv %s.new %s", libc, tmp, tmp, tmp);
	assert_int_equal(system(cmd), 0);
	n = symbolizer__resolve(s, tmp, NULL, 0, off, f, 4);
	assert_true(n >= 0);
	if (n > 0)
		assert_string_not_equal(f[n - 1].func, "sym_target");
	n = symbolizer__resolve(s, tmp, NULL, 0, loff, f, 4);
	assert_true(n >= 1);
	assert_non_null(strstr(f[n - 1].func, "qsort"));
	unlink(tmp);
	symbolizer__free(s);
}

static void test_build_id_key(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[4];
	char exe[PROC_MAP_PATH_MAX];
	uint8_t id[BUILD_ID_MAX], bad[BUILD_ID_MAX];
	struct symbolizer_stats st;
	uint64_t off;
	int n;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	n = build_id_read(exe, -1, id, sizeof(id));
	if (n <= 0)
		skip();
	assert_int_equal(symbolizer__resolve(s, exe, id, (size_t)n, off, f, 4), 1);
	/* Same build-id under a path that does not exist: the open module. */
	assert_int_equal(
		symbolizer__resolve(s, "/proc/self/root/nonexistent", id, (size_t)n, off + 1, f, 4),
		1);
	assert_string_equal(f[0].func, "sym_target");
	symbolizer__stats(s, &st);
	assert_true(st.modules_open == 1 && st.module_open_failed == 0);

	/* The file at path is another binary than the one asked for. */
	memcpy(bad, id, sizeof(bad));
	bad[0] ^= 0xff;
	assert_int_equal(symbolizer__resolve(s, exe, bad, (size_t)n, off, f, 4), -ESTALE);
	/* Remembered: the second try does not reopen. */
	assert_int_equal(symbolizer__resolve(s, exe, bad, (size_t)n, off, f, 4), -ESTALE);
	symbolizer__stats(s, &st);
	assert_true(st.module_open_failed == 1);
	symbolizer__free(s);
}

static void test_errors(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0);
	struct sym_frame f[4];
	char tmp[] = "/tmp/strata-test-notelf-XXXXXX";
	int fd;

	assert_int_equal(symbolizer__resolve(s, "/nonexistent/lib.so", NULL, 0, 0x1000, f, 4),
			 -ENOENT);
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an elf file\n", 16), 16);
	close(fd);
	assert_int_equal(symbolizer__resolve(s, tmp, NULL, 0, 0, f, 4), -ENOEXEC);
	unlink(tmp);
	assert_int_equal(symbolizer__resolve(s, "/", NULL, 0, 0, f, 4), -ENOEXEC);
	assert_int_equal(symbolizer__resolve(s, NULL, NULL, 0, 0, f, 4), -EINVAL);
	assert_int_equal(symbolizer__resolve(s, "/x", NULL, 0, 0, f, 0), -EINVAL);
	symbolizer__free(s);
	symbolizer__free(NULL);
}

/*
 * Debug info missing locally and a debuginfod server that refuses
 * connections: the symbol table still names the function, the query is
 * counted, and it all takes well under a second.
 */
static void test_debuginfod_unreachable(void **state)
{
	char exe[PROC_MAP_PATH_MAX], tmp[] = "/tmp/strata-test-nodwarf-XXXXXX";
	char cache[] = "/tmp/strata-test-dbgd-XXXXXX";
	char cmd[2 * PROC_MAP_PATH_MAX];
	struct sym_frame f[4];
	struct symbolizer_stats st;
	struct timespec t0, t1;
	struct symbolizer *s;
	uint64_t off;
	int fd, n;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug '%s' %s", exe, tmp);
	if (system(cmd) != 0 || !mkdtemp(cache)) {
		unlink(tmp);
		skip();
	}
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);

	s = new_sym(0, 0, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	n = symbolizer__resolve(s, tmp, NULL, 0, off, f, 4);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(n, 1);
	assert_string_equal(f[0].func, "sym_target");
	assert_null(f[0].file);
	symbolizer__stats(s, &st);
	if (st.debuginfod_skipped == 0) { /* library present */
		assert_int_equal(st.debuginfod_queries, 1);
		assert_int_equal(st.debuginfod_failed, 1);
	}
	assert_true(t1.tv_sec - t0.tv_sec < 3);
	symbolizer__free(s);

	/* use_debuginfod off: never asked, even with DEBUGINFOD_URLS set. */
	s = new_sym(0, 0, 0);
	assert_int_equal(symbolizer__resolve(s, tmp, NULL, 0, off, f, 4), 1);
	symbolizer__stats(s, &st);
	assert_int_equal(st.debuginfod_queries + st.debuginfod_skipped, 0);
	symbolizer__free(s);

	unsetenv("DEBUGINFOD_URLS");
	unsetenv("DEBUGINFOD_CACHE_PATH");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
	assert_int_equal(system(cmd), 0);
	unlink(tmp);
}

/* Removes the scratch directory dir and everything in it. */
static void remove_dir(const char *dir)
{
	char cmd[PROC_MAP_PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Runs the shell command that makes a test's files in dir; skips the test
 * (removing dir) when it fails: a tool it needs (objcopy, xz) is missing. */
static void make_files_or_skip(const char *dir, const char *cmd)
{
	if (system(cmd) != 0) {
		remove_dir(dir);
		skip();
	}
}

/* The .gnu_debuglink CRC (zlib's CRC-32) of a whole file. */
static uint32_t file_crc(int fd)
{
	unsigned char buf[65536];
	uLong crc = crc32(0L, Z_NULL, 0);
	ssize_t r;
	off_t at = 0;

	while ((r = pread(fd, buf, sizeof(buf), at)) > 0) {
		crc = crc32(crc, buf, (uInt)r);
		at += r;
	}
	return (uint32_t)crc;
}

/*
 * Debug info split off with a .gnu_debuglink: found next to the binary
 * (checked by build-id), in .debug/ (checked by CRC when there is no
 * build-id), and refused when the CRC does not match.
 */
static void test_debuglink(void **state)
{
	char exe[PROC_MAP_PATH_MAX], dir[] = "/tmp/strata-test-dbglink-XXXXXX";
	char cmd[4 * PROC_MAP_PATH_MAX], bin[PROC_MAP_PATH_MAX];
	struct sym_frame f[4];
	struct symbolizer *s;
	uint64_t off;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir .debug;"
		 "objcopy --only-keep-debug '%s' x.debug;"
		 "objcopy --strip-debug --add-gnu-debuglink=x.debug '%s' x;"
		 "objcopy -R .note.gnu.build-id '%s' nb.full;"
		 "objcopy --only-keep-debug nb.full .debug/nb.debug 2>/dev/null;"
		 "objcopy --strip-debug --add-gnu-debuglink=.debug/nb.debug nb.full nb;"
		 "cp nb bad; cp .debug/nb.debug .debug/bad.debug;"
		 "objcopy --strip-debug --add-gnu-debuglink=.debug/bad.debug nb.full bad;"
		 "echo tampered >> .debug/bad.debug; rm nb.full",
		 dir, exe, exe, exe);
	make_files_or_skip(dir, cmd);

	s = new_sym(0, 0, 0);
	snprintf(bin, sizeof(bin), "%s/x", dir);
	assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 1);
	assert_string_equal(f[0].func, "sym_target");
	assert_true(suffix(f[0].file, "test_symbolize.c"));

	snprintf(bin, sizeof(bin), "%s/nb", dir);
	assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 1);
	assert_true(suffix(f[0].file, "test_symbolize.c"));

	snprintf(bin, sizeof(bin), "%s/bad", dir);
	assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 1);
	assert_string_equal(f[0].func, "sym_target");
	assert_null(f[0].file);
	symbolizer__free(s);

	/*
	 * The agent names files "/proc/self/fd/N": a debug link "M" (a
	 * target's choice, with the right CRC) must not be the agent's own
	 * fd M.
	 */
	char self_name[64], link[16], *found = NULL;
	int exe_fd, dbg_fd, got;
	uint32_t crc;

	snprintf(bin, sizeof(bin), "%s/.debug/nb.debug", dir);
	dbg_fd = open(bin, O_RDONLY | O_CLOEXEC);
	snprintf(bin, sizeof(bin), "%s/nb", dir);
	exe_fd = open(bin, O_RDONLY | O_CLOEXEC);
	assert_true(dbg_fd >= 0 && exe_fd >= 0);
	crc = file_crc(dbg_fd);
	snprintf(self_name, sizeof(self_name), "/proc/self/fd/%d", exe_fd);
	snprintf(link, sizeof(link), "%d", dbg_fd);
	got = debuglink_find(self_name, link, crc, NULL, 0, &found);
	assert_int_equal(got, -ENOENT);
	assert_null(found);
	/* beside the file the fd is (its real path), it is found */
	got = debuglink_find(self_name, "nb.debug", crc, NULL, 0, &found);
	assert_true(got >= 0);
	assert_non_null(found);
	assert_true(suffix(found, "/.debug/nb.debug"));
	free(found);
	close(got);
	close(exe_fd);
	close(dbg_fd);
	remove_dir(dir);
}

/*
 * MiniDebugInfo that inflates to 256 MiB (a few KB of xz): libdwfl would
 * inflate it whole when it loads the symbol table, on the agent (a
 * target's library) and on the server (an agent's upload) alike.  The
 * file's symbols are refused instead, and memory stays flat.
 */
static void test_debugdata_bomb(void **state)
{
	char exe[PROC_MAP_PATH_MAX], dir[] = "/tmp/strata-test-xzbomb-XXXXXX";
	char cmd[4 * PROC_MAP_PATH_MAX], bin[PROC_MAP_PATH_MAX];
	struct sym_frame f[4];
	struct rusage before, after;
	uint64_t off;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; head -c 268435456 /dev/zero | xz -1 -T1 > bomb.xz;"
		 "objcopy --strip-all --add-section .gnu_debugdata=bomb.xz '%s' x;"
		 "head -c 268435456 /dev/zero | xz -1 -T1 --format=lzma > bomb.lzma;"
		 "objcopy --strip-all --add-section .gnu_debugdata=bomb.lzma '%s' y",
		 dir, exe, exe);
	make_files_or_skip(dir, cmd);
	getrusage(RUSAGE_SELF, &before);
	/* xz, and raw LZMA (which libdwfl inflates too) */
	for (int i = 0; i < 4; i++) {
		struct symbolizer_opts o = { .sz = sizeof(o), .hostile_files = i & 1 };
		struct symbolizer *s = symbolizer__new(&o);

		snprintf(bin, sizeof(bin), "%s/%s", dir, i < 2 ? "x" : "y");
		assert_non_null(s);
		struct symbolizer_stats st;

		/* no DWARF left, symbols refused: unresolved, not inflated */
		assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 0);
		assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off + 1, f, 4), 0);
		symbolizer__stats(s, &st);
		assert_int_equal(st.modules_degraded, 1); /* counted once per file */
		symbolizer__free(s);
	}
	getrusage(RUSAGE_SELF, &after);
	assert_true(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB */
	remove_dir(dir);
}

/*
 * Rewrites the header of section name in the ELF at path (a copy made by
 * the test): when size, the section is moved past the file's end and
 * claims size bytes (whole entries), the file extended sparse to hold
 * them; when
 * inflated, the section's compression header claims that inflated size.
 */
static void patch_section(const char *path, const char *name, uint64_t size, uint64_t inflated)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	size_t shstrndx, ndx = 0;
	struct stat stb;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	assert_non_null(gelf_getehdr(e, &eh));
	assert_int_equal(eh.e_ident[EI_CLASS], ELFCLASS64);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while ((scn = elf_nextscn(e, scn))) {
		const char *n;

		assert_non_null(gelf_getshdr(scn, &sh));
		n = elf_strptr(e, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name)) {
			ndx = elf_ndxscn(scn);
			break;
		}
	}
	elf_end(e);
	assert_true(ndx > 0);
	if (size) {
		assert_int_equal(fstat(fd, &stb), 0);
		sh.sh_offset = ((uint64_t)stb.st_size + 4095) & ~4095ull;
		sh.sh_size = sh.sh_entsize ? size / sh.sh_entsize * sh.sh_entsize : size;
		assert_int_equal(ftruncate(fd, (off_t)(sh.sh_offset + sh.sh_size)), 0);
	}
	if (inflated) {
		Elf64_Chdr ch;

		assert_true(sh.sh_flags & SHF_COMPRESSED);
		assert_int_equal(pread(fd, &ch, sizeof(ch), (off_t)sh.sh_offset), sizeof(ch));
		ch.ch_size = inflated;
		assert_int_equal(pwrite(fd, &ch, sizeof(ch), (off_t)sh.sh_offset), sizeof(ch));
	}
	Elf64_Shdr raw = { .sh_name = sh.sh_name,
			   .sh_type = sh.sh_type,
			   .sh_flags = sh.sh_flags,
			   .sh_addr = sh.sh_addr,
			   .sh_offset = sh.sh_offset,
			   .sh_size = sh.sh_size,
			   .sh_link = sh.sh_link,
			   .sh_info = sh.sh_info,
			   .sh_addralign = sh.sh_addralign,
			   .sh_entsize = sh.sh_entsize };
	assert_int_equal(pwrite(fd, &raw, sizeof(raw), (off_t)(eh.e_shoff + ndx * eh.e_shentsize)),
			 sizeof(raw));
	close(fd);
}

/*
 * What a profiled process's file claims, not what it holds, on the agent:
 * - "x": a compressed .debug_str that inflates to 300 MiB, its size
 *   counted inflated (not as stored): the DWARF is not opened
 *   (SYM_DWARF_MAX), the symbol table still names the function;
 * - "claim": a compressed .debug_str of a few KB whose header claims
 *   1 TiB (libelf allocates the claim before it inflates): the same;
 * - "symtab": no DWARF, a sparse .symtab of 512 MiB (libdwfl reads a
 *   symbol table whole): refused, the frame unresolved.
 * Memory stays flat, and each file is counted once as degraded.
 */
static void test_dwarf_inflate_bomb(void **state)
{
	char exe[PROC_MAP_PATH_MAX], dir[] = "/tmp/strata-test-zbomb-XXXXXX";
	char cmd[4 * PROC_MAP_PATH_MAX], bin[PROC_MAP_PATH_MAX];
	struct symbolizer_opts o = { .sz = sizeof(o), .hostile_files = 1 };
	struct symbolizer_stats st;
	struct sym_frame f[4];
	struct rusage before, after;
	struct symbolizer *s;
	uint64_t off;

	locate((uintptr_t)&sym_target, exe, sizeof(exe), &off);
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; head -c 314572800 /dev/zero > z;"
		 "objcopy --remove-section .debug_str --add-section .debug_str=z"
		 " --compress-debug-sections=zlib '%s' x; rm z;"
		 "objcopy --compress-debug-sections=zlib '%s' claim;"
		 "objcopy --strip-debug '%s' symtab",
		 dir, exe, exe, exe);
	make_files_or_skip(dir, cmd);
	snprintf(bin, sizeof(bin), "%s/claim", dir);
	patch_section(bin, ".debug_str", 0, 1ull << 40);
	snprintf(bin, sizeof(bin), "%s/symtab", dir);
	patch_section(bin, ".symtab", 512ull << 20, 0);
	s = symbolizer__new(&o);
	assert_non_null(s);
	getrusage(RUSAGE_SELF, &before);
	for (int i = 0; i < 2; i++) {
		snprintf(bin, sizeof(bin), "%s/%s", dir, i ? "claim" : "x");
		assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 1);
		assert_string_equal(f[0].func, "sym_target");
		assert_null(f[0].file); /* from the symbol table, not DWARF */
	}
	snprintf(bin, sizeof(bin), "%s/symtab", dir);
	assert_int_equal(symbolizer__resolve(s, bin, NULL, 0, off, f, 4), 0);
	getrusage(RUSAGE_SELF, &after);
	assert_true(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB */
	symbolizer__stats(s, &st);
	assert_int_equal(st.modules_degraded, 3);
	/* the file they were made from is whole */
	assert_int_equal(symbolizer__resolve(s, exe, NULL, 0, off, f, 4), 1);
	assert_non_null(f[0].file);
	symbolizer__stats(s, &st);
	assert_int_equal(st.modules_degraded, 3);
	symbolizer__free(s);
	remove_dir(dir);
}

/* --- demangling ------------------------------------------------------------ */

static void test_demangle(void **state)
{
	char *d = sym_demangle("_ZN3foo3barEi");

	assert_non_null(d);
	assert_string_equal(d, "foo::bar(int)");
	free(d);
	d = sym_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
	assert_non_null(d);
	assert_string_equal(d, "std::vector<int, std::allocator<int> >::push_back(int const&)");
	free(d);
	assert_null(sym_demangle("main"));
	assert_null(sym_demangle("i"));
	assert_null(sym_demangle("_Z"));
	assert_null(sym_demangle("_Zgarbage!"));
	assert_null(sym_demangle(""));
	assert_null(sym_demangle(NULL));
}

/* --- kallsyms -------------------------------------------------------------- */

static char *write_text(const char *text)
{
	static const char tmpl[] = "/tmp/strata-test-ksyms-XXXXXX";
	char *path = strdup(tmpl);
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_ksyms_real(void **state)
{
	static const char *const wanted[] = { "schedule", "do_sys_openat2" };
	struct ksyms *k = ksyms__load(NULL);
	char line[512], names[8][128];
	unsigned long long want_addr = 0;
	const char *mod, *name;
	uint64_t start;
	int nnames = 0;
	FILE *f;

	assert_non_null(k);
	if (ksyms__restricted(k)) {
		ksyms__free(k);
		skip(); /* kptr_restrict hides addresses from us */
	}
	assert_true(ksyms__count(k) > 1000);

	f = fopen("/proc/kallsyms", "r");
	assert_non_null(f);
	for (size_t w = 0; w < 2 && !want_addr; w++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			unsigned long long a;
			char t, n[128];

			if (sscanf(line, "%llx %c %127s", &a, &t, n) == 3 && strchr("tT", t) &&
			    !strcmp(n, wanted[w]) && !strchr(line, '[')) {
				want_addr = a;
				break;
			}
		}
	}
	assert_true(want_addr != 0);
	/* Every text name at that address: the table keeps one of them. */
	rewind(f);
	while (fgets(line, sizeof(line), f) && nnames < 8) {
		unsigned long long a;
		char t;

		if (sscanf(line, "%llx %c %127s", &a, &t, names[nnames]) == 3 && a == want_addr &&
		    strchr("tTwW", t))
			nnames++;
	}
	fclose(f);

	for (uint64_t delta = 0; delta < 2; delta++) {
		int ok = 0;

		name = ksyms__resolve(k, want_addr + delta, &mod, &start);
		assert_non_null(name);
		assert_null(mod);
		assert_true(start == want_addr);
		for (int i = 0; i < nnames; i++)
			ok |= !strcmp(names[i], name);
		assert_true(ok);
	}
	assert_null(ksyms__resolve(k, 0, &mod, &start));
	assert_null(ksyms__resolve(k, 0x1000, NULL, NULL));
	ksyms__free(k);
}

static void test_ksyms_fake(void **state)
{
	char *path = write_text("0000000000001000 T _stext\n"
				"0000000000001000 T func_a\n"
				"0000000000001100 W func_b_alias\n"
				"0000000000001100 t func_b\n"
				"0000000000001200 T _etext\n"
				"0000000000002000 D some_data\n"
				"0000000000002500 A abs_sym\n"
				"0000000000003000 T func_last\n"
				"0000000000005000 t mod_f1\t[mymod]\n"
				"0000000000005040 t mod_f2\t[mymod]\n"
				"0000000000005100 d mod_data\t[mymod]\n"
				"0000000000009000 t bpf_prog_abc_foo\t[bpf]\n"
				"this line is garbage\n"
				"zzzz T bad_addr\n");
	struct ksyms *k = ksyms__load(path);
	const char *mod = "x";
	uint64_t start;

	assert_non_null(k);
	assert_int_equal(ksyms__restricted(k), 0);
	assert_int_equal(ksyms__count(k), 6);

	assert_null(ksyms__resolve(k, 0xfff, &mod, &start));
	assert_null(mod);
	assert_string_equal(ksyms__resolve(k, 0x1000, &mod, &start), "func_a");
	assert_null(mod);
	assert_true(start == 0x1000);
	assert_string_equal(ksyms__resolve(k, 0x10ff, NULL, NULL), "func_a");
	/* Global/local before weak at one address. */
	assert_string_equal(ksyms__resolve(k, 0x1100, NULL, &start), "func_b");
	assert_true(start == 0x1100);
	assert_string_equal(ksyms__resolve(k, 0x11ff, NULL, NULL), "func_b");
	/* Past _etext, in data: nothing. */
	assert_null(ksyms__resolve(k, 0x1200, NULL, NULL));
	assert_null(ksyms__resolve(k, 0x2000, NULL, NULL));
	assert_null(ksyms__resolve(k, 0x2600, NULL, NULL));
	/* Last vmlinux function before the modules: a bounded tail. */
	assert_string_equal(ksyms__resolve(k, 0x3000 + 4095, NULL, NULL), "func_last");
	assert_null(ksyms__resolve(k, 0x3000 + 4096, NULL, NULL));

	assert_string_equal(ksyms__resolve(k, 0x503f, &mod, &start), "mod_f1");
	assert_string_equal(mod, "mymod");
	assert_string_equal(ksyms__resolve(k, 0x5040, &mod, &start), "mod_f2");
	assert_true(start == 0x5040);
	/* Module data bounds the module's last function. */
	assert_null(ksyms__resolve(k, 0x5100, &mod, &start));
	assert_string_equal(ksyms__resolve(k, 0x9010, &mod, NULL), "bpf_prog_abc_foo");
	assert_string_equal(mod, "bpf");
	assert_null(ksyms__resolve(k, 0x9000 + 4096, NULL, NULL));
	assert_null(ksyms__resolve(k, 0, NULL, NULL));
	assert_null(ksyms__resolve(k, UINT64_MAX, NULL, NULL));
	ksyms__free(k);
	unlink(path);
	free(path);
}

static void test_ksyms_restricted(void **state)
{
	char *path = write_text("0000000000000000 T _stext\n"
				"0000000000000000 T func_a\n"
				"0000000000000000 t func_b\n"
				"0000000000000000 t mod_f\t[mymod]\n");
	struct ksyms *k = ksyms__load(path);

	assert_non_null(k);
	assert_int_equal(ksyms__restricted(k), 1);
	assert_int_equal(ksyms__count(k), 0);
	assert_null(ksyms__resolve(k, 0, NULL, NULL));
	assert_null(ksyms__resolve(k, 0x1000, NULL, NULL));
	ksyms__free(k);
	unlink(path);
	free(path);

	errno = 0;
	assert_null(ksyms__load("/nonexistent/kallsyms"));
	assert_int_equal(errno, ENOENT);
	ksyms__free(NULL);
	assert_null(ksyms__resolve(NULL, 0x1000, NULL, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_function_entry),
		cmocka_unit_test(test_hostile_files),
		cmocka_unit_test(test_inline_chain),
		cmocka_unit_test(test_padding_unresolved),
		cmocka_unit_test(test_outside_code),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_dynsym_only),
		cmocka_unit_test(test_caches),
		cmocka_unit_test(test_path_identity),
		cmocka_unit_test(test_build_id_key),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_debuglink),
		cmocka_unit_test(test_debugdata_bomb),
		cmocka_unit_test(test_dwarf_inflate_bomb),
		cmocka_unit_test(test_debuginfod_unreachable),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_ksyms_real),
		cmocka_unit_test(test_ksyms_fake),
		cmocka_unit_test(test_ksyms_restricted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
