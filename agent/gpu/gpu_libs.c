// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_libs.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#define LDCONFIG_CMD "ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null"

bool gpu_libs_name_match(const char *base)
{
	static const char *const prefixes[] = { "libcudart.so", "libcuda.so", "libnccl.so" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t n = strlen(prefixes[i]);

		if (!strncmp(base, prefixes[i], n) && (base[n] == 0 || base[n] == '.'))
			return true;
	}
	return false;
}

const char *gpu_libs_ldconfig_line(const char *line, char *buf, size_t n)
{
	const char *arrow = strstr(line, " => "), *name = line;
	size_t len;

	while (*name == ' ' || *name == '\t')
		name++;
	if (!arrow || !gpu_libs_name_match(name))
		return NULL;
	arrow += 4;
	len = strcspn(arrow, "\r\n");
	if (!len || len >= n || arrow[0] != '/')
		return NULL;
	memcpy(buf, arrow, len);
	buf[len] = 0;
	return buf;
}

static int scan_dir(const char *dir, void (*fn)(void *ctx, const char *path), void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[4096];

		if (!gpu_libs_name_match(de->d_name) ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		fn(ctx, path);
		found++;
	}
	closedir(d);
	return found;
}

int gpu_libs_find(void (*fn)(void *ctx, const char *path), void *ctx)
{
	static const char *const dirs[] = { "/usr/local/cuda/lib64", "/usr/local/cuda/lib",
					    "/usr/local/cuda/targets/x86_64-linux/lib" };
	char line[4096], path[4096];
	int found = 0;
	FILE *f = popen(LDCONFIG_CMD, "re");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (gpu_libs_ldconfig_line(line, path, sizeof(path))) {
				fn(ctx, path);
				found++;
			}
		pclose(f);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		found += scan_dir(dirs[i], fn, ctx);
	return found;
}
