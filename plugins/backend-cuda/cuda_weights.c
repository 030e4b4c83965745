/* backend-cuda: weights on the device and the products with them.
 *
 * weight_prepare uploads the stored bytes once, as stored (16-bit stays 16-bit, blocks
 * stay blocks). matmul, for y (n, rows) = x (n, cols) · wᵀ:
 *   f32 weights: cuBLAS in f32 (no TF32);
 *   other types, n ≤ 8 or exact_x: the gemv kernel (x in f32, each weight byte read
 *     once per 8 rows of x);
 *   f16 / bf16, n > 8: x rounded to the weight's type, cuBLAS with f32 accumulation;
 *   block-quantized, n > 8: the weight dequantized to a bf16 scratch, then as bf16.
 * matmul_grouped runs products of one type and shape with n ≤ 8 (a decode step's expert
 * projections) as one launch of the gemv kernel, others one matmul each. */
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>

#include "cuda_backend.h"
#include "cuda_weights.h"

#define GEMV_MAX_ROWS 8

/* The stored rows go up packed: a tensor-parallel slice of columns is a view whose rows
 * are longer than its values (row_bytes of the whole row), and only its values are
 * copied (cudaMemcpy2D), so nothing past the view's last value is read. */
int cuda_weight_prepare(void *state, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                        struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    size_t packed = cinfer_cuda_packed_row_bytes(w->type, w->cols);
    if (!packed || packed > w->row_bytes)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "cuda device %d: weight (%lld x %lld) of stored type %u, rows of %zu bytes: not a "
                                "type and shape this backend reads (F32, F16, BF16 or a block type of whole blocks)",
                                be->device, (long long)w->rows, (long long)w->cols, w->type, w->row_bytes);
    size_t bytes = (size_t)w->rows * packed;
    void *data = NULL;
    char call[128];
    snprintf(call, sizeof call, "cudaMalloc of %zu bytes for a weight", bytes);
    int rc = cuda_enter(be) ? cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s", be->first_error.message)
                            : cuda_fail(be, cudaMalloc(&data, bytes ? bytes : 1), call, err);
    if (rc < 0)
        return rc;
    if (bytes)
        rc = cuda_fail(be, cudaMemcpy2DAsync(data, packed, w->data, w->row_bytes, packed, (size_t)w->rows,
                                             cudaMemcpyHostToDevice, be->stream),
                       "cudaMemcpy2DAsync (weight upload)", err);
    if (rc == 0)
        rc = cuda_fail(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (weight upload)", err);
    if (rc < 0) {
        cudaFree(data);
        return rc;
    }
    *out = *w;
    out->data = data;
    out->row_bytes = packed;
    return 0;
}

void cuda_weight_release(void *state, const struct cinfer_backend_weight *w)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    be->generation++; /* no graph may read it again */
    if (w->data && !cuda_enter(be))
        cuda_note(be, cudaFree((void *)w->data), "cudaFree (weight)");
}

void cuda_embedding(void *state, const struct cinfer_backend_weight *w, const int32_t *tokens, int n, float *out)
{
    struct cuda_backend *be = state;
    if (n <= 0)
        return;
    size_t bytes = (size_t)n * sizeof(int32_t);
    void *dev_tokens = cuda_step_device(be, tokens, bytes); /* copied at step_begin, or staged here */
    struct step_op op = step_record_embedding(w, tokens, n, out);
    if (cuda_step_take(be, &op, dev_tokens != NULL) || cuda_enter(be))
        return;
    struct cuda_host_part part = {tokens, bytes};
    if (!dev_tokens && cuda_stage_parts(be, &part, 1, &dev_tokens))
        return;
    cuda_note(be, cinfer_cuda_embedding(be->stream, w->type, w->data, w->row_bytes, w->rows, w->cols, dev_tokens, n,
                                        out),
              "cinfer_cuda_embedding");
}

static int block_type(uint32_t type)
{
    return type != CINFER_TENSOR_F32 && type != CINFER_TENSOR_F16 && type != CINFER_TENSOR_BF16;
}

/* y = x · wᵀ by the gemv kernel, GEMV_MAX_ROWS rows of x at a time. */
static int gemv(struct cuda_backend *be, const float *x, int n, const struct cinfer_backend_weight *w, float *y)
{
    for (int first = 0; first < n; first += GEMV_MAX_ROWS) {
        int rows = n - first < GEMV_MAX_ROWS ? n - first : GEMV_MAX_ROWS;
        if (cuda_note(be, cinfer_cuda_gemv_quant(be->stream, w->type, w->data, w->row_bytes, w->rows, w->cols,
                                                 x + (size_t)first * w->cols, rows, y + (size_t)first * w->rows),
                      "cinfer_cuda_gemv_quant"))
            return 1;
    }
    return 0;
}

/* y (n, rows) = x (n, cols) · wᵀ in column-major terms: yᵀ (rows, n) = w (cols, rows)ᵀ ·
 * xᵀ (cols, n); a is the weight (lda in its own elements), b is x. */
static int gemm(struct cuda_backend *be, int64_t rows, int64_t cols, int n, const void *a, cudaDataType_t a_type,
                int64_t lda, const void *b, cudaDataType_t b_type, float *y, cublasComputeType_t compute)
{
    const float one = 1.0f, zero = 0.0f;
    return cuda_note_cublas(be, cublasGemmEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)cols, &one, a,
                                             a_type, (int)lda, b, b_type, (int)cols, &zero, y, CUDA_R_32F, (int)rows,
                                             compute, CUBLAS_GEMM_DEFAULT),
                            "cublasGemmEx");
}

static int matmul_one(struct cuda_backend *be, const float *x, int n, const struct cinfer_backend_matmul_out *o,
                      const void *x_bf16, const void *x_f16)
{
    const struct cinfer_backend_weight *w = o->w;
    int failed;
    if (w->type == CINFER_TENSOR_F32) {
        failed = gemm(be, w->rows, w->cols, n, w->data, CUDA_R_32F, (int64_t)(w->row_bytes / 4), x, CUDA_R_32F, o->y,
                      CUBLAS_COMPUTE_32F_PEDANTIC);
    } else if (n <= GEMV_MAX_ROWS || o->exact_x) {
        failed = gemv(be, x, n, w, o->y);
    } else if (w->type == CINFER_TENSOR_BF16) {
        failed = gemm(be, w->rows, w->cols, n, w->data, CUDA_R_16BF, (int64_t)(w->row_bytes / 2), x_bf16, CUDA_R_16BF,
                      o->y, CUBLAS_COMPUTE_32F);
    } else if (w->type == CINFER_TENSOR_F16) {
        failed = gemm(be, w->rows, w->cols, n, w->data, CUDA_R_16F, (int64_t)(w->row_bytes / 2), x_f16, CUDA_R_16F,
                      o->y, CUBLAS_COMPUTE_32F);
    } else {
        uint16_t *wide = cuda_scratch_get(be, &be->w16, (size_t)w->rows * (size_t)w->cols * 2,
                                          "a quantized weight dequantized to bf16");
        failed = !wide ||
                 cuda_note(be, cinfer_cuda_dequantize_bf16(be->stream, w->type, w->data, w->row_bytes, w->rows,
                                                           w->cols, wide),
                           "cinfer_cuda_dequantize_bf16") ||
                 gemm(be, w->rows, w->cols, n, wide, CUDA_R_16BF, w->cols, x_bf16, CUDA_R_16BF, o->y,
                      CUBLAS_COMPUTE_32F);
    }
    if (!failed && o->bias)
        failed = cuda_note(be, cinfer_cuda_add_bias(be->stream, o->y, o->bias, n, (int)w->rows),
                           "cinfer_cuda_add_bias");
    return failed;
}

int cuda_matmul(void *state, const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs,
                struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    if (n <= 0 || n_outs <= 0)
        return 0;
    int64_t cols = outs[0].w->cols;
    int want_bf16 = 0, want_f16 = 0;
    for (int i = 0; i < n_outs; i++) {
        uint32_t t = outs[i].w->type;
        int rounded = n > GEMV_MAX_ROWS && !outs[i].exact_x && t != CINFER_TENSOR_F32;
        want_bf16 |= rounded && (t == CINFER_TENSOR_BF16 || block_type(t));
        want_f16 |= rounded && t == CINFER_TENSOR_F16;
        if (outs[i].w->rows > 0x7fffffff || outs[i].w->cols != cols)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "cuda device %d: matmul output %d has a weight of %lld x %lld (x has %lld "
                                    "columns)",
                                    be->device, i, (long long)outs[i].w->rows, (long long)outs[i].w->cols,
                                    (long long)cols);
    }
    struct step_op op = step_record_matmul(x, n, outs, n_outs);
    if (cuda_step_take(be, &op, op.kind != 0))
        return 0; /* a failure shows at status() */
    if (cuda_enter(be))
        return cuda_status(be, err);
    size_t values = (size_t)n * (size_t)cols;
    /* x16 holds the bf16 copy, then the f16 one after it, when both are wanted */
    uint16_t *x16 = want_bf16 || want_f16 ? cuda_scratch_get(be, &be->x16, values * 2 * 2, "x as 16-bit") : NULL;
    if ((want_bf16 || want_f16) && !x16)
        return cuda_status(be, err);
    if (want_bf16 && cuda_note(be, cinfer_cuda_f32_to_bf16(be->stream, x16, x, values), "cinfer_cuda_f32_to_bf16"))
        return cuda_status(be, err);
    if (want_f16 &&
        cuda_note(be, cinfer_cuda_f32_to_f16(be->stream, x16 + values, x, values), "cinfer_cuda_f32_to_f16"))
        return cuda_status(be, err);
    for (int i = 0; i < n_outs; i++)
        if (matmul_one(be, x, n, &outs[i], x16, x16 ? x16 + values : NULL))
            return cuda_status(be, err);
    return 0;
}

/* One type and shape for every product, few enough rows for the gemv kernel, and not
 * f32 (whose matmul is cuBLAS's): the products then run as one grouped launch of the
 * very kernel matmul runs for each, so the results are the same bits. */
static int one_gemv_shape(int n, const struct cinfer_backend_matmul_out *outs, int n_outs)
{
    const struct cinfer_backend_weight *w0 = outs[0].w;
    if (n > GEMV_MAX_ROWS || w0->type == CINFER_TENSOR_F32 || n_outs > 65535)
        return 0;
    for (int i = 1; i < n_outs; i++) {
        const struct cinfer_backend_weight *w = outs[i].w;
        if (w->type != w0->type || w->rows != w0->rows || w->cols != w0->cols || w->row_bytes != w0->row_bytes)
            return 0;
    }
    return 1;
}

int cuda_matmul_grouped(void *state, const float *const *xs, int n, const struct cinfer_backend_matmul_out *outs,
                        int n_outs, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be); /* xs is a host array of its own */
    if (n <= 0 || n_outs <= 0)
        return 0;
    if (!one_gemv_shape(n, outs, n_outs)) {
        for (int i = 0; i < n_outs; i++) {
            int rc = cuda_matmul(state, xs[i], n, &outs[i], 1, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (cuda_enter(be))
        return cuda_status(be, err);
    struct cinfer_cuda_gemv_operands *ops = malloc((size_t)n_outs * sizeof *ops);
    if (!ops)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda device %d: out of host memory for %d grouped products",
                                be->device, n_outs);
    for (int i = 0; i < n_outs; i++)
        ops[i] = (struct cinfer_cuda_gemv_operands){outs[i].w->data, xs[i], outs[i].y};
    const struct cinfer_backend_weight *w = outs[0].w;
    struct cuda_host_part part = {ops, (size_t)n_outs * sizeof *ops};
    void *dev_ops;
    int failed = cuda_stage_parts(be, &part, 1, &dev_ops) ||
                 cuda_note(be,
                           cinfer_cuda_gemv_quant_grouped(be->stream, w->type, w->row_bytes, w->rows, w->cols, n, ops,
                                                          dev_ops, n_outs),
                           "cinfer_cuda_gemv_quant_grouped");
    free(ops);
    for (int i = 0; i < n_outs && !failed; i++)
        if (outs[i].bias)
            failed = cuda_note(be, cinfer_cuda_add_bias(be->stream, outs[i].y, outs[i].bias, n, (int)w->rows),
                               "cinfer_cuda_add_bias");
    return failed ? cuda_status(be, err) : 0;
}
