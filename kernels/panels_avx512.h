/* kernels/panels_avx512.h — what the AVX-512 panel kernels (q8_panels_avx512.c,
 * panels16_avx512.c) share: the panel geometry, the pass size and the store mask of a
 * panel's asked rows. Included by *_avx512.c files only. */
#ifndef CINFER_KERNELS_PANELS_AVX512_H
#define CINFER_KERNELS_PANELS_AVX512_H

#include <immintrin.h>

#include "kernels.h"
#include "kernels_impl.h"

#define PANEL CINFER_KERNEL_PANEL_ROWS
#define TILE_ROWS 8 /* activation rows per pass over a panel */
/* the loops over rows and chains must unroll for their sums to stay in registers */
#define UNROLL _Pragma("GCC unroll 8")

/* Lanes [j0, j1) of panel g (rows 16g ..), as a store mask. */
static inline __attribute__((always_inline)) __mmask16 panel_rows_mask(int g, int j0, int j1)
{
    return (__mmask16)cinfer_panel_rows_asked(g, j0, j1);
}

#endif
