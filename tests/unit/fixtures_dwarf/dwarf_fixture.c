/* Fixture for test_dwarf/test_datasym: known lines and columns. Line numbers and columns
 * below are asserted by tests/unit/test_dwarf.c: edit both together. */
#define AI static inline __attribute__((always_inline))
#define NI __attribute__((noinline))

int g_table[100];                              /* .bss, global */
static long s_hidden[8] = { 1, 2, 3 };         /* .data, local */
const char g_ro[32] = "read only fixture";     /* .rodata, global */
const char *const g_ptrs[2] = { "a", "b" };   /* .data.rel.ro under PIE */
__thread int tls_counter;                      /* .tbss */
__thread long tls_init[4] = { 7 };             /* .tdata */
static char s_bss[4096];                       /* .bss, local */
volatile int sink;

AI int leaf(int x)
{
	__asm__ volatile("mark_c_leaf: nop");
	return x * 3;
}

AI int mid(int x)
{
	sink = x;
	return leaf(x + 1) + 1;
}

static NI int outer_static(int x)
{
	sink = x;
	return mid(x) * 2;
}

NI int plain(int x)
{
	__asm__ volatile("mark_c_plain: nop");
	return x + s_hidden[x & 7];
}

int main(int argc, char **argv)
{
	tls_counter = argc;
	s_bss[argc] = 1;
	s_hidden[argc & 7] += argc;
	g_table[argc] = outer_static(argc) + plain(argc);
	return g_ro[argc] + (int)tls_init[0] + (int)g_ptrs[argc & 1][0] + s_bss[1];
}
