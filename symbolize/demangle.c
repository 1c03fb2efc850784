// SPDX-License-Identifier: Apache-2.0
/* C++ (Itanium ABI) demangling through libstdc++'s __cxa_demangle. */
#include "symbolize/symbolize.h"

#include <stdlib.h>

/* From <cxxabi.h>, which is C++ only; libstdc++ exports it with C linkage. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *sym_demangle(const char *mangled)
{
	int status = 0;
	char *out;

	/*
	 * Only "_Z..." names are mangled symbols; __cxa_demangle would also
	 * "demangle" plain words as type names ("i" -> "int").
	 */
	if (!mangled || mangled[0] != '_' || mangled[1] != 'Z')
		return NULL;
	out = __cxa_demangle(mangled, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}
