/* http/http_auth.c — the API key check: "Authorization: Bearer KEY". The comparison
 * takes the same time wherever the first difference is, so the key cannot be guessed
 * byte by byte from response times. */
#include <string.h>
#include <strings.h>

#include "http/http_auth.h"

static int equal_constant_time(const char *a, size_t a_len, const char *b, size_t b_len)
{
    /* Walks the expected key's length whatever the candidate's; the lengths' difference
     * is folded in rather than returned early. */
    unsigned char diff = (unsigned char)(a_len != b_len);
    for (size_t i = 0; i < b_len; i++) {
        unsigned char x = i < a_len ? (unsigned char)a[i] : 0;
        diff |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

int cinfer_http_auth_header_ok(const char *h, const char *api_key)
{
    if (!api_key || !*api_key)
        return 1;
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    const char *token = h + 7;
    while (*token == ' ' || *token == '\t')
        token++;
    size_t len = strlen(token);
    while (len && (token[len - 1] == ' ' || token[len - 1] == '\t'))
        len--;
    return equal_constant_time(token, len, api_key, strlen(api_key));
}
