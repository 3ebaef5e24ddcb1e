/* MemProf function GUIDs as LLVM computes them. LLVM's MD5Hash(S) is the first 8 bytes of
 * MD5(S) read as a little-endian uint64 (MD5Result::low, llvm/Support/MD5.h); MemProf's
 * memprof::getGUID(Name) (llvm/lib/ProfileData/MemProf.cpp) first canonicalizes the name
 * with FunctionSamples::getCanonicalFnName(Name, "selected"): a trailing ".llvm.<n>" and
 * then ".part.<n>" suffix is dropped, ".__uniq.<n>" is kept.
 *
 * Internal linkage: MemProf hashes the symbol's linkage name as the DWARF/ELF has it, with
 * NO "<file>;" prefix, both in the raw-profile reader and when the compiler matches call
 * sites (DISubprogram linkage name). Two static functions of the same name in different
 * files therefore share a GUID in MemProf (C++ statics at least differ by _ZL mangling;
 * -funique-internal-linkage-names adds ".__uniq." to keep them apart). The IR-level
 * identifier GlobalValue::getGlobalIdentifier uses "<file>;<name>" for local linkage
 * (';' since LLVM 19, ':' before); guid_global_identifier builds that form for callers
 * that need the IR GUID (instrprof, ThinLTO) instead. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* LLVM MD5Hash: low 64 bits (little-endian first half) of MD5 of len bytes. */
uint64_t guid_md5_low64(const void *data, size_t len);
/* Length of name once getCanonicalFnName("selected") drops .llvm. / .part. suffixes. */
size_t guid_canonical_len(const char *name, size_t len);
/* The MemProf GUID of a (mangled) function name: MD5Hash(canonical name). */
uint64_t guid_memprof(const char *mangled);
/* getGlobalIdentifier: "<file>;<name>" when local (file "" -> "<unknown>"), else name;
 * a leading '\1' is dropped. Returns the length it needs (snprintf-like), or -EINVAL. */
int guid_global_identifier(char *buf, size_t sz, const char *name, bool local,
			   const char *file);
