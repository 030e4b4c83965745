/* backend-cuda: forward steps (backend.h's step_begin and step_end) and their CUDA
 * graphs.
 *
 * step_begin copies the step's named host arrays (tokens, KV slots, RoPE's cos and sin)
 * and its attention sequence lists (packed as the attention kernel reads them) to one
 * device buffer in one upload; the step's ops then read those copies instead of staging
 * their host arrays one op at a time. A step of at most CUDA_GRAPH_MAX_TOKENS rows also
 * queues its ops (cuda_step_log.h) until one that answers the host (logits_top, sample,
 * a download, status, step_end...). The queue then runs one of three ways, as the graph
 * cache plans it: launched op by op; captured into a CUDA graph while launching it
 * (cudaStreamBeginCapture records the launches, the graph then runs once); or, when an
 * equal queue was captured before, replayed as that graph with one cudaGraphLaunch. A
 * decode step of a dense model is one queue from the embedding to the logits, so after
 * its second step at a batch size it costs one launch instead of a few hundred.
 *
 * The graph reads the step buffer, the activations, the weights and the KV storage at
 * the addresses it was captured with: the step buffer never moves while graphs live (a
 * larger step grows it and bumps the generation, which drops them), and neither do the
 * runtime's buffers during its life. Only their contents change from step to step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

static void drop_exec(void *ctx, void *exec)
{
    (void)ctx;
    cudaGraphExecDestroy((cudaGraphExec_t)exec);
    cudaGetLastError();
}

void cuda_step_init(struct cuda_backend *be)
{
    memset(&be->step, 0, sizeof be->step);
    step_graphs_init(&be->step.graphs, drop_exec, be);
    const char *env = getenv("CINFER_CUDA_GRAPHS");
    be->step.graphs_off = env && strcmp(env, "0") == 0;
}

void cuda_step_free(struct cuda_backend *be)
{
    step_graphs_free(&be->step.graphs);
    step_log_free(&be->step.log);
    cuda_scratch_free(&be->step.dev);
}

void *cuda_step_device(struct cuda_backend *be, const void *host, size_t bytes)
{
    int i = step_names_array(&be->step.names, host, bytes);
    return i < 0 ? NULL : be->step.array_dev[i];
}

int cuda_step_seq_list(struct cuda_backend *be, const struct cinfer_backend_attn_seq *seqs, int n_seqs,
                       void **dev_seqs, void **dev_tables)
{
    int l = step_names_list(&be->step.names, seqs, n_seqs);
    if (l < 0)
        return 0;
    *dev_seqs = be->step.list_dev[l];
    *dev_tables = be->step.tables_dev;
    return 1;
}

int cuda_step_queue(struct cuda_backend *be, const struct step_op *op)
{
    if (!be->step.queueing)
        return 0;
    if (step_log_append(&be->step.log, op) < 0) { /* no room to queue: launch what there is, then this */
        cuda_step_flush(be);
        return 0;
    }
    return 1;
}

int cuda_step_take(struct cuda_backend *be, const struct step_op *op, int queueable)
{
    if (queueable)
        return cuda_step_queue(be, op);
    cuda_step_flush(be);
    return 0;
}

/* Launches one queued op: the op itself, which launches while the queue runs. */
static void run_op(struct cuda_backend *be, const struct step_op *op)
{
    struct cinfer_error err = {0};
    if (step_op_run(cuda_backend_ops(), be, op, &err) < 0) /* the op's own refusal, kept like a device error */
        cuda_note_message(be, err.code, err.message);
}

static void run_log(struct cuda_backend *be, const struct step_log *log)
{
    for (int i = 0; i < log->n; i++)
        run_op(be, &log->ops[i]);
}

/* Captures the queue into a graph (recorded, not run); the graph, or NULL when anything in
 * the queue could not be captured (then nothing ran, and no error stays noted). */
static cudaGraphExec_t capture(struct cuda_backend *be, const struct step_log *log)
{
    int failed_before = be->failed;
    struct cinfer_error first_before = be->first_error;
    uint64_t errors_before = be->errors;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    be->step.capturing = 1;
    be->step.capture_broken = 0;
    run_log(be, log);
    be->step.capturing = 0;
    cudaError_t end = cudaStreamEndCapture(be->stream, &graph);
    int ok = end == cudaSuccess && graph && !be->step.capture_broken && be->errors == errors_before &&
             cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph)
        cudaGraphDestroy(graph);
    if (!ok) {
        if (exec)
            cudaGraphExecDestroy(exec);
        cudaGetLastError();
        /* a launch that was only being recorded failed nothing: the queue runs again */
        be->failed = failed_before;
        be->first_error = first_before;
        return NULL;
    }
    return exec;
}

void cuda_step_flush(struct cuda_backend *be)
{
    struct cuda_step *st = &be->step;
    if (!st->queueing)
        return;
    st->queueing = 0; /* the rest of the step launches op by op */
    if (st->log.n == 0 || cuda_enter(be)) { /* cuda_enter's failure is noted: the step fails */
        step_log_clear(&st->log);
        return;
    }
    st->running_log = 1;
    struct step_graph_entry *entry = NULL;
    enum step_plan plan =
        step_graphs_plan(&st->graphs, &st->log, st->names.n_tokens, st->names.n_seqs, be->generation, &entry);
    if (plan == STEP_REPLAY) {
        cuda_note(be, cudaGraphLaunch((cudaGraphExec_t)entry->exec, be->stream), "cudaGraphLaunch (a decode step)");
    } else if (plan == STEP_CAPTURE) {
        cudaGraphExec_t exec = capture(be, &st->log);
        step_graphs_captured(&st->graphs, entry, exec, be->generation);
        if (exec)
            cuda_note(be, cudaGraphLaunch(exec, be->stream), "cudaGraphLaunch (a newly captured step)");
        else
            run_log(be, &st->log);
    } else {
        run_log(be, &st->log);
    }
    st->running_log = 0;
    step_log_clear(&st->log);
}

int cuda_step_begin(void *state, const struct cinfer_backend_step *step, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    struct cuda_step *st = &be->step;
    cuda_step_flush(be); /* a step that was not ended */
    if (step_names_open(&st->names, step) < 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "cuda device %d: step_begin names %d host arrays and %d sequence lists of %d (at "
                                "most %d arrays and %d lists)",
                                be->device, step->n_arrays, step->n_seq_lists, step->n_seqs, STEP_MAX_ARRAYS,
                                STEP_MAX_SEQ_LISTS);
    st->names.open = 0; /* until the copies are made */
    if (cuda_enter(be))
        return cuda_status(be, err);
    /* every part's device offset depends on the step's row and sequence counts only (the
     * page tables, whose size moves, come last), so a graph captured at one step reads
     * the next step's arrays where it read these */
    struct cinfer_cuda_attn_seq *packed = NULL;
    int32_t *tables = NULL;
    size_t entries = 0;
    if (cuda_pack_seq_lists(step->seq_lists, step->n_seq_lists, step->n_seqs, &packed, &tables, &entries) < 0) {
        free(packed);
        free(tables);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda device %d: out of memory packing a step's %d sequences",
                                be->device, step->n_seqs);
    }
    struct cuda_host_part parts[STEP_MAX_ARRAYS + 2];
    int n_parts = 0;
    for (int i = 0; i < step->n_arrays; i++)
        parts[n_parts++] = (struct cuda_host_part){step->arrays[i].data, step->arrays[i].bytes};
    parts[n_parts++] = (struct cuda_host_part){packed, sizeof *packed * (size_t)step->n_seq_lists * step->n_seqs};
    parts[n_parts++] = (struct cuda_host_part){tables, sizeof *tables * entries};
    void *dev[STEP_MAX_ARRAYS + 2];
    int failed = cuda_stage_parts_to(be, &st->dev, "a step's host arrays", parts, n_parts, dev);
    free(packed);
    free(tables);
    if (failed)
        return cuda_status(be, err);
    for (int i = 0; i < step->n_arrays; i++)
        st->array_dev[i] = dev[i];
    for (int l = 0; l < step->n_seq_lists; l++)
        st->list_dev[l] = (struct cinfer_cuda_attn_seq *)dev[step->n_arrays] + (size_t)l * step->n_seqs;
    st->tables_dev = dev[step->n_arrays + 1];
    st->names.open = 1;
    st->queueing = !st->graphs_off && step->n_tokens <= CUDA_GRAPH_MAX_TOKENS && be->tp_size <= 1;
    step_log_clear(&st->log);
    return 0;
}

/* Padded with graphs off too (CINFER_CUDA_GRAPHS=0): the switch then changes how a step
 * is launched and nothing else, so both ways give the same bits. */
int cuda_decode_bucket(void *state, int n)
{
    struct cuda_backend *be = state;
    return be->tp_size > 1 ? n : step_decode_bucket(n, CUDA_GRAPH_MAX_TOKENS);
}

int cuda_step_end(void *state, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    be->step.names.open = 0;
    if (!be->failed)
        return 0;
    return cuda_status(be, err);
}
