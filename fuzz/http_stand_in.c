/* The stand-in transport's replies; see http_stand_in.h. */
#include "http_stand_in.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cinfer_http_reply_error(struct http_conn *c, int status, const char *type, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    if (!type || !type[0])
        abort(); /* every error reply carries its OpenAI-style type */
    snprintf(c->param, sizeof c->param, "%s", param ? param : "");
    c->status = status;
    c->replies++;
}

void cinfer_http_reply_text(struct http_conn *c, int status, const char *content_type, const char *text, size_t len)
{
    (void)content_type;
    (void)text;
    (void)len;
    c->status = status;
    c->replies++;
}
