// C++ fixture for test_dwarf: a template inlined into a template, in a namespace.
// Lines and columns are asserted by tests/unit/test_dwarf.c: edit both together.
namespace fx {
volatile int sink;

template <typename T>
inline __attribute__((always_inline)) T twice(T v)
{
	asm volatile("mark_cxx_leaf: nop");
	return v + v;
}

template <int N>
__attribute__((noinline)) int run(int x)
{
	sink = N;
	return twice<int>(x) + N;
}
} // namespace fx

int main(int argc, char **)
{
	return fx::run<3>(argc);
}
