/* llama_cpp_greedy — llama.cpp's greedy continuation of a prompt, for the record that
 * cinfer's tests compare against (tests/data/models/quantized/): the prompt is
 * tokenized by llama.cpp itself (or given as ids), evaluated in one llama_decode, then
 * n_new tokens are chosen one per llama_decode by an argmax over the logits (temperature
 * 0; ties go to the lowest id), with the context as the bench peer makes it (flash
 * attention "auto", f16 KV cache unless --kv-type says otherwise).
 *
 *   llama_cpp_greedy --model FILE (--prompt TEXT | --prompt-ids 1,2,3) [--n-new 48]
 *                    [--threads 2] [--no-bos] [--kv-type f16|f32|q8_0|bf16]
 *
 * One JSON object on stdout: {"prompt_ids":[...], "greedy_ids":[...], "text": prompt and
 * continuation as llama.cpp detokenizes them, "llama_cpp_build": ...}.
 *
 * Built by scripts/quantized-test-models.sh against the source build in .cache/llama.cpp
 * (as scripts/bench-common.sh builds llama_cpp_peer). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#ifndef LLAMA_CPP_PEER_BUILD
#define LLAMA_CPP_PEER_BUILD "llama.cpp built from source"
#endif

#define MAX_TOKENS 4096

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llama_cpp_greedy: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void on_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

/* s as a JSON string on stdout. */
static void print_json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            printf("\\n");
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *prompt_ids = NULL, *kv_type = "f16";
    int n_new = 48, n_threads = 2, add_bos = 1;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "--no-bos")) {
            add_bos = 0;
            continue;
        }
        if (i + 1 >= argc)
            die("%s needs a value", flag);
        const char *value = argv[++i];
        if (!strcmp(flag, "--model"))
            model_path = value;
        else if (!strcmp(flag, "--prompt"))
            prompt = value;
        else if (!strcmp(flag, "--prompt-ids"))
            prompt_ids = value;
        else if (!strcmp(flag, "--n-new"))
            n_new = atoi(value);
        else if (!strcmp(flag, "--threads"))
            n_threads = atoi(value);
        else if (!strcmp(flag, "--kv-type"))
            kv_type = value;
        else
            die("unknown option %s (see the comment at the top of bench/peers/llama_cpp_greedy.c)", flag);
    }
    if (!model_path || (!prompt == !prompt_ids) || n_new < 1 || n_new > 1024)
        die("usage: --model FILE (--prompt TEXT | --prompt-ids 1,2,3) [--n-new 1..1024] [--threads N]");
    llama_log_set(on_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model)
        die("%s: llama_model_load_from_file failed (see llama.cpp's message above)", model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);

    static llama_token tokens[MAX_TOKENS];
    int n_prompt = 0;
    if (prompt) {
        n_prompt = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), tokens, MAX_TOKENS, add_bos, true);
        if (n_prompt < 0)
            die("the prompt takes more than %d tokens", MAX_TOKENS);
    } else {
        for (const char *p = prompt_ids; *p && n_prompt < MAX_TOKENS;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= n_vocab)
                die("--prompt-ids: '%s' is not a list of ids below %d", prompt_ids, n_vocab);
            tokens[n_prompt++] = (llama_token)v;
            p = *end == ',' ? end + 1 : end;
        }
    }
    if (n_prompt < 1 || n_prompt + n_new > MAX_TOKENS)
        die("%d prompt tokens and %d new ones: expected 1..%d in all", n_prompt, n_new, MAX_TOKENS);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)((n_prompt + n_new + 255) / 256 * 256);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    enum ggml_type kv = !strcmp(kv_type, "f32")    ? GGML_TYPE_F32
                        : !strcmp(kv_type, "bf16") ? GGML_TYPE_BF16
                        : !strcmp(kv_type, "q8_0") ? GGML_TYPE_Q8_0
                                                   : GGML_TYPE_F16;
    cp.type_k = cp.type_v = kv;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx)
        die("%s: llama_init_from_model failed (see llama.cpp's message above)", model_path);

    struct llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    batch.n_tokens = n_prompt;
    for (int i = 0; i < n_prompt; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == n_prompt - 1;
    }
    int n = n_prompt;
    for (int step = 0; step < n_new; step++) {
        if (llama_decode(ctx, batch) != 0)
            die("%s: llama_decode failed at position %d", model_path, n);
        const float *logits = llama_get_logits_ith(ctx, batch.n_tokens - 1);
        int best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (logits[v] > logits[best])
                best = v;
        tokens[n] = best;
        batch.n_tokens = 1;
        batch.token[0] = best;
        batch.pos[0] = n;
        batch.n_seq_id[0] = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0] = 1;
        n++;
    }
    static char text[1 << 16];
    int text_len = llama_detokenize(vocab, tokens, n, text, (int32_t)sizeof text, true, false); /* as a user reads it */
    if (text_len < 0)
        die("the text takes more than %zu bytes", sizeof text);

    printf("{\"prompt_ids\":[");
    for (int i = 0; i < n_prompt; i++)
        printf("%s%d", i ? "," : "", tokens[i]);
    printf("],\"greedy_ids\":[");
    for (int i = n_prompt; i < n; i++)
        printf("%s%d", i > n_prompt ? "," : "", tokens[i]);
    printf("],\"text\":");
    print_json_string(text, (size_t)text_len);
    printf(",\"kv_type\":\"%s\",\"llama_cpp_build\":\"%s\"}\n", kv_type, LLAMA_CPP_PEER_BUILD);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
