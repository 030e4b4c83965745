/* http/http_json.c — a request body as a JSON object, or a 400 that says where the
 * text went wrong (jansson's line and column) or what was found instead of an object. */
#include "http/http_server.h"

static const char *json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "something else";
}

json_t *cinfer_http_parse_json_object(const struct http_request *req)
{
    if (req->body_len == 0) {
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", NULL,
                                "the request body is empty: expected a JSON object");
        return NULL;
    }
    json_error_t jerr;
    /* JSON_REJECT_DUPLICATES: two values for one key would make the request ambiguous. */
    json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", NULL,
                                "malformed JSON at line %d, column %d: %s",
                                jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", NULL,
                                "expected a JSON object as the request body, found %s", json_kind(j));
        json_decref(j);
        return NULL;
    }
    return j;
}
