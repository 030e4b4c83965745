/* Typed readers for JSON request fields; see request_fields.h. */
#include "http/request_fields.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

const char *cinfer_http_json_type_words(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

int cinfer_http_field_error(const struct http_request *req, const char *name, const char *fmt, ...)
{
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    cinfer_http_reply_error(req->conn, 400, "invalid_request_error", name, "%s: %s", name, detail);
    return -1;
}

/* The field, or NULL when absent or null. */
static const json_t *present(const json_t *obj, const char *name)
{
    const json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

int cinfer_http_field_number(const struct http_request *req, const json_t *obj, const char *name, double lo, double hi,
                             double *out)
{
    const json_t *v = present(obj, name);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return cinfer_http_field_error(req, name, "expected a number in [%g, %g], found %s", lo, hi,
                                       cinfer_http_json_type_words(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return cinfer_http_field_error(req, name, "expected a number in [%g, %g], found %g", lo, hi, x);
    *out = x;
    return 1;
}

int cinfer_http_field_int(const struct http_request *req, const json_t *obj, const char *name, long long lo,
                          long long hi, long long *out)
{
    const json_t *v = present(obj, name);
    if (!v)
        return 0;
    long long x;
    if (json_is_integer(v)) {
        x = (long long)json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v); /* 16.0 is an integer to a JSON client */
    } else {
        return cinfer_http_field_error(req, name, "expected an integer in [%lld, %lld], found %s", lo, hi,
                                       json_is_real(v) ? "a fractional number" : cinfer_http_json_type_words(v));
    }
    if (x < lo || x > hi)
        return cinfer_http_field_error(req, name, "expected an integer in [%lld, %lld], found %lld", lo, hi, x);
    *out = x;
    return 1;
}

int cinfer_http_field_bool(const struct http_request *req, const json_t *obj, const char *name, int *out)
{
    const json_t *v = present(obj, name);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return cinfer_http_field_error(req, name, "expected true or false, found %s", cinfer_http_json_type_words(v));
    *out = json_is_true(v);
    return 1;
}

int cinfer_http_field_string(const struct http_request *req, const json_t *obj, const char *name, const char **out)
{
    const json_t *v = present(obj, name);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return cinfer_http_field_error(req, name, "expected a string, found %s", cinfer_http_json_type_words(v));
    *out = json_string_value(v);
    return 1;
}

int cinfer_http_field_of_type(const struct http_request *req, const json_t *obj, const char *name, json_type type,
                              const json_t **out)
{
    const json_t *v = present(obj, name);
    if (!v)
        return 0;
    if (json_typeof(v) != type)
        return cinfer_http_field_error(req, name, "expected %s, found %s",
                                       type == JSON_ARRAY    ? "an array"
                                       : type == JSON_OBJECT ? "an object"
                                                             : "another type",
                                       cinfer_http_json_type_words(v));
    *out = v;
    return 1;
}
