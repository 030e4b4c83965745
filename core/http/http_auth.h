/* http/http_auth.h — the API key check on an Authorization header's value. */
#ifndef CINFER_HTTP_AUTH_H
#define CINFER_HTTP_AUTH_H

/* 1 when authorization (the header's value, or NULL when absent) is "Bearer KEY" for
 * this api_key (scheme in any case, spaces around the key ignored), or when api_key is
 * NULL or empty (no key configured). The key is compared in constant time. */
int cinfer_http_auth_header_ok(const char *authorization, const char *api_key);

#endif
