/* GET /v1/models: the one model this server serves. */
#include "cinfer/config.h"
#include "http/http_server.h"

void cinfer_openai_handle_models(const struct http_request *req)
{
    const struct http_server_ctx *ctx = req->ctx;
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    if (cinfer_engine_server_info(ctx->engine, &info, &err)) {
        cinfer_http_reply_engine_error(req->conn, &err);
        return;
    }
    json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:s, s:i}", "id", ctx->model_name ? ctx->model_name : "", "object",
                              "model", "created", (json_int_t)ctx->created_unix_s, "owned_by", "cinfer", "root",
                              info.model_path, "max_model_len", info.max_request_len);
    json_t *body = model ? json_pack("{s:s, s:[o]}", "object", "list", "data", model) : NULL;
    if (body)
        cinfer_http_reply_json(req->conn, 200, body);
    else
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory listing the models");
}
