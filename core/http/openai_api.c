/* PLACEHOLDER until the OpenAI API layer lands (helper "openai"): answers 501. */
#include "http/http_server.h"

void openai_handle_completions(const struct http_request *req)
{
    http_reply_error(req->conn, 501, "internal_error", NULL, "%s is not built yet", req->path);
}
void openai_handle_chat_completions(const struct http_request *req)
{
    http_reply_error(req->conn, 501, "internal_error", NULL, "%s is not built yet", req->path);
}
void openai_handle_models(const struct http_request *req)
{
    http_reply_error(req->conn, 501, "internal_error", NULL, "%s is not built yet", req->path);
}
