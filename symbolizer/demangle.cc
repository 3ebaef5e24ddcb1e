// sym_demangle: Itanium C++ demangling through the C++ runtime's abi::__cxa_demangle,
// behind the C API of elfsym.h. Only "_Z..." names are demangled (a bare "i" would
// otherwise come back as "int"), and only up to SYM_DEMANGLE_MAX_LEN characters, since
// the demangler's stack use grows with the input. The result is always malloc'd.
#include <cxxabi.h>
#include <cstdlib>
#include <cstring>

extern "C" {
#include "symbolizer/elfsym.h"
}

extern "C" char *sym_demangle(const char *name)
{
	if (!name)
		return nullptr;
	size_t len = strnlen(name, SYM_DEMANGLE_MAX_LEN + 1);
	if (len >= 2 && len <= SYM_DEMANGLE_MAX_LEN && name[0] == '_' && name[1] == 'Z') {
		int status = 0;
		char *out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
		if (status == 0 && out)
			return out;
		free(out);
	}
	return strdup(name);
}
