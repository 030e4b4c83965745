/* The grammar engine (core/grammar): grammar text, regular expressions and JSON
 * Schema compiled to automata; masks checked against the obvious reference (for every
 * token, replay the output so far on a fresh matcher and try the token's bytes), along
 * seeded random walks through each grammar; refusals name the rule, keyword or place. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "support/runner.h"

/* ---- a small vocabulary: every byte, and multi-byte pieces that cross rule edges ---- */

static const char *const pieces[] = {
    "{\"", "\":", "\": ", "\",", "\", \"", "\"}", "}}", "}]", "]}", "[{", "[\"", "\"]", " \"", "\n  \"", ",\n", "true",
    "false", "null", "tr", "ue", "nu", "ll", "12", "3.", ".5", "-1", "00", "e+", "abc", "ab", "name", "age", "\"name",
    "\\n", "\\\"", "\\u00", "ok", "is", " is", "the", " the", "a\"", "\"a", "é", "\xc3", "\xa9", "日本", "\xe6", "—",
    ",\"", "1,", "0}", "\" :", "::", "id", "tags", "\"x\"", "xyz", "A-Z", "2024", "-01-", "T12:", ":00Z", "@", ".com",
};

struct vocab {
    int n;
    char **tok;
    size_t *len;
};

static int vocab_bytes(void *ctx, int32_t id, const uint8_t **bytes, size_t *len)
{
    struct vocab *v = ctx;
    *bytes = (const uint8_t *)v->tok[id];
    *len = v->len[id];
    return 0;
}

static struct vocab V;
static struct cinfer_token_table *TT;

static void vocab_setup(void)
{
    int n_pieces = (int)(sizeof pieces / sizeof pieces[0]);
    V.n = 256 + n_pieces + 1; /* the last id has no bytes (a special token) */
    V.tok = calloc((size_t)V.n, sizeof *V.tok);
    V.len = calloc((size_t)V.n, sizeof *V.len);
    for (int b = 0; b < 256; b++) {
        V.tok[b] = malloc(1);
        V.tok[b][0] = (char)b;
        V.len[b] = 1;
    }
    for (int i = 0; i < n_pieces; i++) {
        V.tok[256 + i] = strdup(pieces[i]);
        V.len[256 + i] = strlen(pieces[i]);
    }
    V.tok[V.n - 1] = strdup("");
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_token_table_create(V.n, V.n, vocab_bytes, &V, &TT, &err), 0);
}

static void vocab_teardown(void)
{
    cinfer_token_table_free(&TT);
    for (int i = 0; i < V.n; i++)
        free(V.tok[i]);
    free(V.tok);
    free(V.len);
}

static struct cinfer_grammar_masks *masks_of(const char *text)
{
    struct cinfer_grammar *g = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_grammar_compile_text(text, strlen(text), &g, &err);
    ck_assert_msg(rc == 0, "compiling %s: %s", text, err.message);
    struct cinfer_grammar_masks *m = NULL;
    ck_assert_int_eq(cinfer_grammar_masks_create(g, TT, &m, &err), 0);
    return m;
}

/* Does the grammar accept text as a whole? */
static int accepts(struct cinfer_grammar_masks *m, const char *text)
{
    struct cinfer_grammar_matcher *mt = NULL;
    ck_assert_int_eq(cinfer_grammar_matcher_create(m, &mt), 0);
    int ok = strlen(text) == 0 || cinfer_grammar_matcher_accept_bytes(mt, (const uint8_t *)text, strlen(text)) == 0;
    ok = ok && cinfer_grammar_matcher_can_end(mt);
    cinfer_grammar_matcher_free(&mt);
    return ok;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Walks the grammar token by token (a uniformly random allowed token; later, short
 * tokens are preferred so walks end), checking each step's mask against the reference.
 * Returns the text (malloc'd), which the grammar must accept whole when the walk ended. */
static char *walk_and_check(struct cinfer_grammar_masks *m, int max_steps, int *ended)
{
    struct cinfer_grammar_matcher *mt = NULL;
    ck_assert_int_eq(cinfer_grammar_matcher_create(m, &mt), 0);
    size_t words = ((size_t)TT->vocab + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    char *out = calloc(1, 1);
    size_t out_len = 0;
    *ended = 0;
    for (int step = 0; step < max_steps; step++) {
        cinfer_grammar_matcher_fill_mask(mt, bits);
        /* reference: replay and try every token */
        int allowed[1024], n_allowed = 0;
        for (int id = 0; id < TT->vocab; id++) {
            struct cinfer_grammar_matcher *ref = NULL;
            ck_assert_int_eq(cinfer_grammar_matcher_create(m, &ref), 0);
            int ok = out_len == 0 || cinfer_grammar_matcher_accept_bytes(ref, (const uint8_t *)out, out_len) == 0;
            ck_assert(ok);
            ok = cinfer_grammar_matcher_accept_token(ref, id) == 0;
            cinfer_grammar_matcher_free(&ref);
            int bit = (int)(bits[id >> 6] >> (id & 63) & 1);
            ck_assert_msg(bit == ok, "after \"%s\": token %d \"%.*s\": mask says %d, reference says %d", out, id,
                          (int)TT->len[id], V.tok[id], bit, ok);
            if (ok)
                allowed[n_allowed++] = id;
        }
        if (cinfer_grammar_matcher_must_end(mt) || (cinfer_grammar_matcher_can_end(mt) && (step > 20 || rnd() % 8 == 0))) {
            *ended = 1;
            break;
        }
        ck_assert_msg(n_allowed > 0, "after \"%s\": nothing allowed, yet the grammar cannot end", out);
        int pick = allowed[rnd() % (uint32_t)n_allowed];
        if (step > 12) { /* head for the end: prefer closing bytes */
            int closers[1024], n_closers = 0;
            for (int k = 0; k < n_allowed; k++)
                if (TT->len[allowed[k]] == 1 && strchr("\"}],", V.tok[allowed[k]][0]) && V.tok[allowed[k]][0])
                    closers[n_closers++] = allowed[k];
            if (n_closers && rnd() % 4)
                pick = closers[rnd() % (uint32_t)n_closers];
        }
        ck_assert_int_eq(cinfer_grammar_matcher_accept_token(mt, pick), 0);
        out = realloc(out, out_len + TT->len[pick] + 1);
        memcpy(out + out_len, V.tok[pick], TT->len[pick]);
        out_len += TT->len[pick];
        out[out_len] = '\0';
    }
    free(bits);
    cinfer_grammar_matcher_free(&mt);
    return out;
}

START_TEST(grammar_text_accepts_and_rejects)
{
    struct cinfer_grammar_masks *m = masks_of("root ::= \"a\" [b-c]+ tail\n"
                                              "tail ::= ( \"x\" | \"yz\" )? # a comment\n");
    ck_assert(accepts(m, "ab"));
    ck_assert(accepts(m, "acbcyz"));
    ck_assert(accepts(m, "abx"));
    ck_assert(!accepts(m, "a"));
    ck_assert(!accepts(m, "abxx"));
    ck_assert(!accepts(m, "ba"));
    cinfer_grammar_masks_unref(&m);

    m = masks_of("root ::= [^\"\\\\]{2,3} \"日\" .\n");
    ck_assert(accepts(m, "ab日本"));
    ck_assert(accepts(m, "éé€日x"));
    ck_assert(!accepts(m, "a日x"));
    ck_assert(!accepts(m, "a\"b日x"));
    cinfer_grammar_masks_unref(&m);

    /* recursion that is not left recursion */
    m = masks_of("root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | [0-9]+\n");
    ck_assert(accepts(m, "[]"));
    ck_assert(accepts(m, "[1,[2,[]],34]"));
    ck_assert(!accepts(m, "[1,]"));
    ck_assert(!accepts(m, "[[1]"));
    cinfer_grammar_masks_unref(&m);
}
END_TEST

static void expect_refusal(const char *text, const char *needle)
{
    struct cinfer_grammar *g = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_grammar_compile_text(text, strlen(text), &g, &err);
    ck_assert_msg(rc != 0, "%s compiled", text);
    ck_assert_msg(strstr(err.message, needle), "refusal of %s: \"%s\" lacks \"%s\"", text, err.message, needle);
    printf("refused as expected: %s\n", err.message);
}

START_TEST(grammar_text_refusals_say_where)
{
    expect_refusal("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n", "rule 'expr' is left-recursive");
    expect_refusal("root ::= a b\na ::= \"x\"\n", "rule 'b' (used at line 1) is never defined");
    expect_refusal("root ::= \"abc\n", "line 1, column 14");
    expect_refusal("root ::= [z-a]\n", "range whose end is not below its start");
    expect_refusal("start ::= \"a\"\n", "expected a rule named 'root'");
    expect_refusal("root ::= \"a\"{3,2}\n", "m <= n");
    expect_refusal("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
}
END_TEST

START_TEST(masks_match_the_reference_on_random_walks)
{
    static const char *const grammars[] = {
        ("root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws (\",\" ws \"\\\"age\\\"\" ws \":\" ws num)? ws \"}\"\n"
        "ws ::= [ \\n]{0,3}\nstr ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\n])* \"\\\"\"\nnum ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n"),
        "root ::= (\"true\" | \"false\" | \"null\" | \"tr\" \"ick\")+\n",
        "root ::= v\nv ::= \"[\" (v (\",\" v)*)? \"]\" | [0-9]{1,2} | \"\\\"\" [a-z]* \"\\\"\"\n",
        "root ::= \"日本\"* \"—\" [a-zé]{0,5}\n",
    };
    for (size_t gi = 0; gi < sizeof grammars / sizeof grammars[0]; gi++) {
        struct cinfer_grammar_masks *m = masks_of(grammars[gi]);
        for (int w = 0; w < 12; w++) {
            int ended;
            char *text = walk_and_check(m, 40, &ended);
            if (ended)
                ck_assert_msg(accepts(m, text), "walk output \"%s\" is not accepted whole", text);
            free(text);
        }
        int positions, computed;
        int64_t uncertain;
        cinfer_grammar_masks_stats(m, &positions, &computed, &uncertain);
        printf("grammar %zu: %d positions, %d computed, %lld uncertain token entries\n", gi, positions, computed,
               (long long)uncertain);
        cinfer_grammar_masks_unref(&m);
    }
}
END_TEST

static struct cinfer_grammar_masks *schema_masks(const char *schema)
{
    char *text = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_json_schema_to_grammar(schema, strlen(schema), &text, &err);
    ck_assert_msg(rc == 0, "schema %s: %s", schema, err.message);
    struct cinfer_grammar_masks *m = masks_of(text);
    free(text);
    return m;
}

START_TEST(json_schema_grammars)
{
    struct cinfer_grammar_masks *m = schema_masks(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
        "\"age\":{\"type\":\"integer\",\"minimum\":18,\"maximum\":130},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},"
        "\"maxItems\":2}},\"required\":[\"name\"]}");
    ck_assert(accepts(m, "{\"name\": \"abcd\"}"));
    ck_assert(accepts(m, "{\"name\":\"\",\"age\":18,\"tags\":[\"a\",\"b\"]}"));
    ck_assert(accepts(m, "{\"name\":\"x\", \"tags\": []}"));
    ck_assert(accepts(m, "{\"name\":\"x\",\"age\":130}"));
    ck_assert(!accepts(m, "{\"name\":\"abcde\"}"));
    ck_assert(!accepts(m, "{\"age\":20}"));
    ck_assert(!accepts(m, "{\"name\":\"x\",\"age\":17}"));
    ck_assert(!accepts(m, "{\"name\":\"x\",\"age\":131}"));
    ck_assert(!accepts(m, "{\"name\":\"x\",\"tags\":[\"a\",\"b\",\"a\"]}"));
    ck_assert(!accepts(m, "{\"name\":\"x\",\"other\":1}"));
    for (int w = 0; w < 6; w++) {
        int ended;
        free(walk_and_check(m, 30, &ended));
    }
    cinfer_grammar_masks_unref(&m);

    m = schema_masks("{\"type\":\"number\",\"minimum\":-5,\"exclusiveMaximum\":10}");
    const char *yes[] = {"-5", "-4.5", "0", "-0.25", "9.999", "3"};
    const char *no[] = {"-5.5", "10", "10.5", "-6", "1e3"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_msg(accepts(m, yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < 5; i++)
        ck_assert_msg(!accepts(m, no[i]), "%s", no[i]);
    cinfer_grammar_masks_unref(&m);

    m = schema_masks("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                     "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
                     "\"$ref\":\"#/$defs/node\"}");
    ck_assert(accepts(m, "{\"v\":1,\"next\":{\"v\":-2,\"next\":null}}"));
    ck_assert(!accepts(m, "{\"v\":1,\"next\":{\"v\":2}}"));
    cinfer_grammar_masks_unref(&m);

    m = schema_masks("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"additionalProperties\":{\"type\":\"null\"}}");
    ck_assert(accepts(m, "{\"a\":true,\"b\":null}"));
    ck_assert(accepts(m, "{\"ab\":null}"));
    ck_assert(!accepts(m, "{\"a\":null}"));
    cinfer_grammar_masks_unref(&m);

    m = schema_masks("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-[0-9]+$\"}");
    ck_assert(accepts(m, "\"AB-12\""));
    ck_assert(!accepts(m, "\"AB-\""));
    cinfer_grammar_masks_unref(&m);
    m = schema_masks("{\"type\":\"string\",\"pattern\":\"a\\\"b\"}");
    ck_assert(accepts(m, "\"xxa\\\"byy\""));
    ck_assert(!accepts(m, "\"ab\""));
    cinfer_grammar_masks_unref(&m);
}
END_TEST

static void expect_schema_refusal(const char *schema, const char *needle)
{
    char *text = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_json_schema_to_grammar(schema, strlen(schema), &text, &err);
    ck_assert_msg(rc != 0, "%s was accepted", schema);
    ck_assert_msg(strstr(err.message, needle), "refusal of %s: \"%s\" lacks \"%s\"", schema, err.message, needle);
    printf("refused as expected: %s\n", err.message);
}

START_TEST(json_schema_refusals_name_the_keyword)
{
    expect_schema_refusal("{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"type\":\"null\"}}}}",
                          "json_schema at #/properties/a: keyword 'not'");
    expect_schema_refusal("{\"type\":\"array\",\"uniqueItems\":true}", "keyword 'uniqueItems'");
    expect_schema_refusal("{\"properties\":{\"xa\":{\"type\":\"string\"}},\"patternProperties\":{\"^x\":{\"type\":\"integer\"}}}",
                          "pattern \"^x\" also governs the declared property \"xa\"");
    expect_schema_refusal("{\"$ref\":\"http://example.com/s.json\"}", "keyword '$ref' to another document");
    expect_schema_refusal("{\"type\":\"string\",\"format\":\"idn-email\"}", "keyword 'format' \"idn-email\"");
    expect_schema_refusal("{\"type\":\"number\",\"minimum\":0.5}", "keyword 'minimum'");
    expect_schema_refusal("{\"type\":\"number\",\"multipleOf\":3}", "keyword 'multipleOf'");
    expect_schema_refusal("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences");
    expect_schema_refusal("{\"type\":\"strin\"}", "\"strin\" is not a JSON Schema type");
    expect_schema_refusal("{\"type\":", "not JSON");
}
END_TEST

START_TEST(root_renamed_for_embedding)
{
    const char *text = "root ::= \"root\" item (\",\" root)?  # root stays in comments\nitem ::= [root] | rooty\nrooty ::= \"y\"\n";
    char *renamed = NULL;
    ck_assert_int_eq(cinfer_grammar_rename_root(text, "inner", &renamed), 0);
    ck_assert_str_eq(renamed, "inner ::= \"root\" item (\",\" inner)?  # root stays in comments\nitem ::= [root] | rooty\n"
                              "rooty ::= \"y\"\n");
    char *outer = NULL;
    ck_assert_int_ne(asprintf(&outer, "root ::= \"<\" inner \">\"\n%s", renamed), -1);
    struct cinfer_grammar_masks *m = masks_of(outer);
    ck_assert(accepts(m, "<rooto,rooty>"));
    ck_assert(!accepts(m, "rooto"));
    cinfer_grammar_masks_unref(&m);
    free(outer);
    free(renamed);
}
END_TEST

START_TEST(regex_grammars)
{
    char *text = NULL;
    struct cinfer_error err = {0};
    const char *re = "(\\d{3})-[a-c]+|x\\.y?";
    ck_assert_int_eq(cinfer_regex_to_grammar(re, strlen(re), &text, &err), 0);
    struct cinfer_grammar_masks *m = masks_of(text);
    free(text);
    ck_assert(accepts(m, "123-abca"));
    ck_assert(accepts(m, "x."));
    ck_assert(accepts(m, "x.y"));
    ck_assert(!accepts(m, "12-a"));
    ck_assert(!accepts(m, "xzy"));
    cinfer_grammar_masks_unref(&m);
    re = "(?=a)b";
    ck_assert_int_ne(cinfer_regex_to_grammar(re, strlen(re), &text, &err), 0);
    ck_assert_msg(strstr(err.message, "lookaround"), "%s", err.message);
    /* a repetition whose upper bound is not a number says so (it once failed without a
     * word: fuzz_grammar's seed "t = {1, 2, 3}") */
    static const char *const bad_repeats[] = {"t = {1, 2, 3}", "a{2,x}", "a{ 1}"};
    for (size_t i = 0; i < sizeof bad_repeats / sizeof bad_repeats[0]; i++) {
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(cinfer_regex_to_grammar(bad_repeats[i], strlen(bad_repeats[i]), &text, &err),
                         CINFER_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.message, "expected a repetition {m}, {m,} or {m,n}"), "%s: %s", bad_repeats[i],
                      err.message);
    }
    /* patterns whose DFA doubles with each step are refused by the compile budget, not
     * after seconds and hundreds of MB (a fuzz find: a 400-byte regex in an OpenAI request
     * took 1.4 s and 92 MB to compile before the budget) */
    static const char *const exploding[] = {"(a|b)*a(a|b){30}",
                                            "[,5V+]VvV+VV......................................................"
                                            "..............................................................cc"};
    for (size_t i = 0; i < sizeof exploding / sizeof exploding[0]; i++) {
        ck_assert_int_eq(cinfer_regex_to_grammar(exploding[i], strlen(exploding[i]), &text, &err), 0);
        struct cinfer_grammar *g = NULL;
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(cinfer_grammar_compile_text(text, strlen(text), &g, &err), CINFER_ERR_RANGE);
        ck_assert_ptr_null(g);
        ck_assert_msg(strstr(err.message, "rule 'root' makes too large an automaton") &&
                          strstr(err.message, "1048576 NFA positions"),
                      "%s: %s", exploding[i], err.message);
        free(text);
    }
}
END_TEST

static Suite *suite_grammar(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, vocab_setup, vocab_teardown);
    tcase_add_test(tc, grammar_text_accepts_and_rejects);
    tcase_add_test(tc, grammar_text_refusals_say_where);
    tcase_add_test(tc, masks_match_the_reference_on_random_walks);
    tcase_add_test(tc, json_schema_grammars);
    tcase_add_test(tc, json_schema_refusals_name_the_keyword);
    tcase_add_test(tc, regex_grammars);
    tcase_add_test(tc, root_renamed_for_embedding);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_grammar)
