/* PLACEHOLDER until the native API layer lands (helper "native"): answers 501. */
#include "http/http_server.h"

#define NOT_YET(fn)                                                                              \
    void fn(const struct http_request *req)                                                      \
    {                                                                                            \
        http_reply_error(req->conn, 501, "internal_error", NULL, "%s is not built yet", req->path); \
    }
NOT_YET(native_handle_generate)
NOT_YET(native_handle_tokenize)
NOT_YET(native_handle_detokenize)
NOT_YET(native_handle_server_info)
NOT_YET(native_handle_flush_cache)
NOT_YET(native_handle_abort_request)
NOT_YET(native_handle_health_generate)
