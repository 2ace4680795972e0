// <immintrin.h> for the files compiled with -mavx512f (the AVX-512 kernels). GCC 12 warns inside
// its own AVX-512 headers that _mm512_undefined_ps() is uninitialised (GCC bug 105593, fixed in
// 13); those warnings are silenced for these files only.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
