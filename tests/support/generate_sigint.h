/* The Ctrl-C check for `cinfer generate`, shared by the CLI and fault tests. */
#ifndef CINFER_TEST_GENERATE_SIGINT_H
#define CINFER_TEST_GENERATE_SIGINT_H

/* Starts `cinfer generate --model MODEL <extra...> PROMPT` with a generation far too
 * long to finish (100000 tokens, EOS ignored), waits until it streams, checks that it
 * runs its two workers, sends SIGINT, and checks that it exits 0 within 10 s and that
 * its workers are gone 2 s later. extra is NULL-ended (more flags, e.g. "--n", "2"). */
void cinfer_test_generate_sigint(const char *model, const char *const *extra, const char *prompt);

#endif
