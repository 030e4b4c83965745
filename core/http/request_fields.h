/* http/request_fields.h — typed readers for the fields of a JSON request body, shared
 * by the OpenAI and native API layers so that every bad field gets the same answer:
 * 400 invalid_request_error naming the field, what was expected and what was found,
 *   "temperature: expected a number in [0, 2], found 3.5"
 *   "max_tokens: expected an integer, found a string"
 *
 * Each reader returns 1 when the field is present and valid (the value is stored), 0
 * when it is absent or JSON null (OpenAI treats null as "not given"; *out is left
 * alone, so callers preset the default), and -1 after it has replied 400 — the
 * handler then just returns. */
#ifndef CINFER_HTTP_REQUEST_FIELDS_H
#define CINFER_HTTP_REQUEST_FIELDS_H

#include <jansson.h>

#include "http/http_server.h"

/* Words for a JSON value's type in an error: "a string", "an array", "true", ... */
const char *cinfer_http_json_type_words(const json_t *v);

int cinfer_http_field_number(const struct http_request *req, const json_t *obj, const char *name, double lo, double hi,
                             double *out);
int cinfer_http_field_int(const struct http_request *req, const json_t *obj, const char *name, long long lo,
                          long long hi, long long *out);
int cinfer_http_field_bool(const struct http_request *req, const json_t *obj, const char *name, int *out);
/* *out points into obj (valid while obj lives). */
int cinfer_http_field_string(const struct http_request *req, const json_t *obj, const char *name, const char **out);
/* Present and of the given jansson type (JSON_ARRAY or JSON_OBJECT): *out is borrowed. */
int cinfer_http_field_of_type(const struct http_request *req, const json_t *obj, const char *name, json_type type,
                              const json_t **out);

/* Replies 400 for a field whose value is wrong in a way the readers above cannot see;
 * always returns -1. */
int cinfer_http_field_error(const struct http_request *req, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
