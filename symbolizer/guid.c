/* LLVM-compatible function GUIDs over OpenSSL's MD5 (libcrypto's EVP interface, opened
 * on first use: base/dynlib.h); the naming rules are documented in guid.h with the LLVM
 * sources they follow. */
#include "symbolizer/guid.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <openssl/evp.h>

#include "base/dynlib.h"

#define GUID_LIBCRYPTO "libcrypto.so.3"   /* the OpenSSL 3 ABI of <openssl/evp.h> */

static struct {
	int (*digest)(const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *,
		      ENGINE *);
	const EVP_MD *(*md5)(void);
} crypto;
static const char *const crypto_names[] = { "EVP_Digest", "EVP_md5" };
static struct dynlib crypto_lib = DYNLIB_INIT(GUID_LIBCRYPTO, crypto_names, crypto, 1);

uint64_t guid_md5_low64(const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	uint64_t v = 0;

	if (dynlib_load(&crypto_lib) < 0 ||
	    !crypto.digest(data, len, md, &mdlen, crypto.md5(), NULL) || mdlen < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | md[i];
	return v;
}

/* Last occurrence of needle in s[0..len), or NULL. */
static const char *rfind(const char *s, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	if (len < n)
		return NULL;
	for (size_t i = len - n + 1; i-- > 0;)
		if (!memcmp(s + i, needle, n))
			return s + i;
	return NULL;
}

static const char *rfind_dot(const char *s, size_t len)
{
	return memrchr(s, '.', len);
}

size_t guid_canonical_len(const char *name, size_t len)
{
	/* Order matters as in LLVM: a suffix appended later is stripped first. */
	static const char *const suffixes[] = { ".llvm.", ".part." };

	for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
		const char *it = rfind(name, len, suffixes[k]);

		/* Only when nothing with a '.' follows the suffix's own trailing dot. */
		if (it && rfind_dot(name, len) == it + strlen(suffixes[k]) - 1)
			len = (size_t)(it - name);
	}
	return len;
}

uint64_t guid_memprof(const char *mangled)
{
	size_t len;

	if (!mangled)
		return 0;
	len = strlen(mangled);
	return guid_md5_low64(mangled, guid_canonical_len(mangled, len));
}

int guid_global_identifier(char *buf, size_t sz, const char *name, bool local,
			   const char *file)
{
	int n;

	if (!name || (sz && !buf))
		return -EINVAL;
	if (name[0] == '\1')
		name++;
	if (local)
		n = snprintf(buf, sz, "%s;%s", file && *file ? file : "<unknown>", name);
	else
		n = snprintf(buf, sz, "%s", name);
	return n < 0 ? -EINVAL : n;
}
