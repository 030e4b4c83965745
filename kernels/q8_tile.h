/* kernels/q8_tile.h — the Q8_0 weights x int16 activations integer matmul on 256-bit
 * vectors, shared by the AVX2 and AVX-512 files. The includer defines:
 *   Q8_TILE_M, Q8_TILE_N   activation rows and weight rows per tile (register budget)
 *   Q8_FN(name)            a unique name for each function
 *   Q8_ATTR                function attributes (a target for VNNI)
 *   Q8_DOT(xl, xh, wl, wh) 32 s16 x 32 s16 -> 8 int32 sums of 4 products
 * Weights are sign-extended to int16 once per tile and used by every activation row;
 * |x| <= 32767 and |w| <= 128 keep every int32 partial sum exact. Each output element
 * sees the same operations whatever tile it lands in, so results do not depend on
 * the batch. */
#define Q8_AI static inline __attribute__((always_inline)) Q8_ATTR

Q8_AI float Q8_FN(hsum)(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

Q8_AI void Q8_FN(tile)(const struct cinfer_kernel_xblock *xq, int blocks, int mr, const uint8_t *w, size_t w_row_bytes,
                       int nr, float *y, int ldy)
{
    __m256 acc[Q8_TILE_M][Q8_TILE_N];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        __m256i w_lo[Q8_TILE_N], w_hi[Q8_TILE_N];
        float dw[Q8_TILE_N];
        for (int j = 0; j < nr; j++) {
            const uint8_t *blk = w + (size_t)j * w_row_bytes + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
            /* the same block of the next tile's row: rows are short next to memory latency */
            _mm_prefetch((const char *)blk + Q8_TILE_N * w_row_bytes, _MM_HINT_T0);
            uint16_t d_bits;
            memcpy(&d_bits, blk, 2);
            dw[j] = _cvtsh_ss(d_bits);
            w_lo[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));
            w_hi[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 18)));
        }
        for (int i = 0; i < mr; i++) {
            const struct cinfer_kernel_xblock *xb = xq + (size_t)i * blocks + b;
            __m256i x_lo = _mm256_loadu_si256((const __m256i *)xb->q);
            __m256i x_hi = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
            for (int j = 0; j < nr; j++) {
                __m256 products = _mm256_cvtepi32_ps(Q8_DOT(x_lo, x_hi, w_lo[j], w_hi[j]));
                acc[i][j] = _mm256_fmadd_ps(products, _mm256_set1_ps(xb->d * dw[j]), acc[i][j]);
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            y[(size_t)i * ldy + j] = Q8_FN(hsum)(acc[i][j]);
}

/* The tile for mr rows (a constant in each case, so the accumulators stay in registers). */
Q8_AI void Q8_FN(tile_rows)(const struct cinfer_kernel_xblock *xq, int blocks, int mr, const uint8_t *w,
                            size_t w_row_bytes, int nr, float *y, int ldy)
{
    switch (mr) {
#if Q8_TILE_M >= 4
    case 4: Q8_FN(tile)(xq, blocks, 4, w, w_row_bytes, nr, y, ldy); break;
    case 3: Q8_FN(tile)(xq, blocks, 3, w, w_row_bytes, nr, y, ldy); break;
#endif
    case 2: Q8_FN(tile)(xq, blocks, 2, w, w_row_bytes, nr, y, ldy); break;
    default: Q8_FN(tile)(xq, blocks, 1, w, w_row_bytes, nr, y, ldy); break;
    }
}

static Q8_ATTR void Q8_FN(matmul_q8)(const struct cinfer_kernel_xblock *xq, int n, int k, const uint8_t *w,
                                     size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    int block_rows = (int)((256 * 1024) / (w_row_bytes ? w_row_bytes : 1));
    block_rows = block_rows < Q8_TILE_N ? Q8_TILE_N : block_rows - block_rows % Q8_TILE_N;
    for (int jb = j0; jb < j1; jb += block_rows) {
        int jb_end = jb + block_rows < j1 ? jb + block_rows : j1;
        for (int i = 0; i < n; i += Q8_TILE_M) {
            int mr = n - i < Q8_TILE_M ? n - i : Q8_TILE_M;
            const struct cinfer_kernel_xblock *xi = xq + (size_t)i * blocks;
            float *yi = y + (size_t)i * ldy;
            int j = jb;
            for (; j + Q8_TILE_N <= jb_end; j += Q8_TILE_N)
                Q8_FN(tile_rows)(xi, blocks, mr, w + (size_t)j * w_row_bytes, w_row_bytes, Q8_TILE_N, yi + j, ldy);
            for (; j < jb_end; j++)
                Q8_FN(tile_rows)(xi, blocks, mr, w + (size_t)j * w_row_bytes, w_row_bytes, 1, yi + j, ldy);
        }
    }
}

#undef Q8_AI
