/* POST /v1/chat/completions: the messages rendered with the model's chat template (or
 * --chat-template), then generated like a completion. The rendered text is tokenized
 * without adding BOS/EOS, as Hugging Face's apply_chat_template does: the template
 * writes the model's special tokens itself (bos_token included), and their text in the
 * rendering becomes their ids. Tools are laid out by the template; the output comes
 * back as text (tool calls are not parsed out of it). */
#include <stdlib.h>
#include <string.h>

#include "cinfer/chat_template.h"
#include "cinfer/tokenizer.h"
#include "http/openai_request.h"
#include "http/openai_run.h"

/* bos_token and eos_token as the template expects them: the tokens' text. */
static void add_special_token_text(const struct http_server_ctx *ctx, json_t *vars)
{
    const struct cinfer_tokenizer_ctx *tok = ctx->tokenizer;
    if (!tok)
        return;
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    const struct {
        const char *name;
        int32_t id;
    } specials[] = {{"bos_token", info.bos_id}, {"eos_token", info.eos_id}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        const char *piece = specials[i].id >= 0 ? tok->ops->id_to_piece(tok->tok, specials[i].id) : NULL;
        if (piece && !json_object_get(vars, specials[i].name)) /* chat_template_kwargs may set them */
            json_object_set_new(vars, specials[i].name, json_string(piece));
    }
}

/* continue_final_message: the rendering ends right after the last message's text, so
 * the model carries on with it (Hugging Face cuts the same way). */
static int cut_after_final_message(const struct http_request *req, const json_t *vars, char *text, size_t *len)
{
    const json_t *messages = json_object_get(vars, "messages");
    const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *content = json_string_value(json_object_get(last, "content"));
    size_t n = strlen(content);
    while (n && (content[n - 1] == ' ' || content[n - 1] == '\n' || content[n - 1] == '\t'))
        n--; /* templates often strip the message; match what is left */
    const char *found = NULL;
    for (const char *p = text; n && (p = memmem(p, *len - (size_t)(p - text), content, n)); p++)
        found = p;
    if (!found) {
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", "continue_final_message",
                                "continue_final_message: the chat template's output does not contain the final "
                                "message's text, so it cannot be continued");
        return -1;
    }
    *len = (size_t)(found - text) + n;
    text[*len] = '\0';
    return 0;
}

void cinfer_openai_handle_chat_completions(const struct http_request *req)
{
    json_t *body = cinfer_http_parse_json_object(req);
    if (!body)
        return;
    struct openai_request r;
    if (cinfer_openai_request_parse(req, body, OPENAI_CHAT, cinfer_openai_vocab_size(req->ctx), &r) < 0)
        return;
    if (!req->ctx->chat_template) {
        cinfer_openai_request_free(&r);
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", "messages",
                                "this model has no chat template: start the server with --chat-template FILE, or "
                                "send the prompt to /v1/completions");
        return;
    }
    add_special_token_text(req->ctx, r.template_context);
    char *vars = json_dumps(r.template_context, JSON_COMPACT);
    char *text = NULL;
    size_t len = 0;
    struct cinfer_error err = {0};
    int rc = vars ? cinfer_chat_template_render(req->ctx->chat_template, vars, strlen(vars), &text, &len, &err)
                  : cinfer_error_set(&err, CINFER_ERR_NOMEM, "out of memory for the template's variables");
    free(vars);
    if (rc) {
        /* a template that refuses the conversation (raise_exception) is the caller's
         * to fix; anything else is the server's */
        int status = rc == CINFER_ERR_NOMEM || rc == CINFER_ERR_UNSUPPORTED ? 500 : 400;
        cinfer_http_reply_error(req->conn, status, status == 400 ? "invalid_request_error" : "internal_error",
                                "messages",
                                "chat template: %s", err.message);
        cinfer_openai_request_free(&r);
        free(text);
        return;
    }
    if (!text && !(text = calloc(1, 1))) /* an empty rendering */
        len = 0;
    r.prompts = text ? calloc(1, sizeof *r.prompts) : NULL;
    if (!r.prompts) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for the prompt");
    } else {
        r.n_prompts = 1;
        if ((!r.continue_final_message || cut_after_final_message(req, r.template_context, text, &len) == 0) &&
            cinfer_openai_tokenize_prompt(req, text, len, 0, "messages", &r.prompts[0]) == 0) {
            free(text);
            cinfer_openai_run(req, &r);
            return;
        }
    }
    free(text);
    cinfer_openai_request_free(&r);
}
