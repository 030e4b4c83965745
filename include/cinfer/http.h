/* cinfer/http.h — the HTTP server: the OpenAI API and SGLang's native API in front of
 * an engine, on libmicrohttpd. `cinfer serve` is this plus an engine and signal
 * handling; an embedder can run it beside its own use of the same engine.
 *
 * Left out of the appliance build (CINFER_MINIMAL): there the functions are absent
 * and this header is not installed. */
#ifndef CINFER_HTTP_H
#define CINFER_HTTP_H

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cinfer_engine;
struct cinfer_server_args;
struct cinfer_http_server;

/* Listens on args->host:args->port (port 0 picks a free one) with the server section
 * of args (API key, body limit, TLS files, chat template, served model name). The
 * engine must outlive the server. Serves from its own threads until stopped. */
CINFER_API int cinfer_http_server_start(struct cinfer_engine *engine, const struct cinfer_server_args *args,
                                        struct cinfer_http_server **out, struct cinfer_error *err);
/* The port actually bound (useful with port 0). */
CINFER_API int cinfer_http_server_port(const struct cinfer_http_server *srv);
/* The model name it serves (server.served_model_name, or the model's base name). */
CINFER_API const char *cinfer_http_server_model_name(const struct cinfer_http_server *srv);
/* Stops accepting, aborts the requests still streaming, closes every connection and
 * frees the server; sets *srv to NULL. */
CINFER_API void cinfer_http_server_stop(struct cinfer_http_server **srv);

#ifdef __cplusplus
}
#endif
#endif
